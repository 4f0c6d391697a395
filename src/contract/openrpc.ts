import type {
  Contract,
  MethodSpec,
  NotificationSpec,
  Schema,
  SubscriptionSpec,
} from './contract.js';
import { jsonSchemaOf, shapeOf } from './json-schema.js';
import type { JsonSchema } from './json-schema.js';
import type { SubscriptionMethodNames } from '../protocol/subscription-frames.js';

interface ContentDescriptor {
  name: string;
  required?: boolean;
  description?: string;
  schema: JsonSchema;
}

interface MethodObject {
  name: string;
  description?: string;
  paramStructure: 'by-name' | 'by-position' | 'either';
  params: ContentDescriptor[];
  result: ContentDescriptor;
}

/** A notification the server sends: a method object without a result. */
type NotificationObject = Omit<MethodObject, 'result'>;

export interface OpenRpcDocument {
  openrpc: '1.3.2';
  info: { title: string; version: string; description?: string };
  methods: MethodObject[];
  /** Extension: notifications the server sends (method objects without a result). */
  'x-notifications': NotificationObject[];
  /** Extension: methods the client implements and the server calls. */
  'x-client-methods': MethodObject[];
  /** Extension: subscriptions, with the method names clients use for them. */
  'x-subscriptions': {
    methods: SubscriptionMethodNames;
    subscriptions: {
      name: string;
      description?: string;
      params: ContentDescriptor[];
      data: ContentDescriptor;
    }[];
  };
  /** Schemas the others refer to (`{"$ref": "#/components/schemas/..."}`): recursive ones. */
  components?: { schemas: Record<string, JsonSchema> };
}

/**
 * Schemas shared by the whole document: the definitions a JSON Schema carries (zod puts
 * recursive ones there: `z.lazy`, getters) move to `components.schemas`, and every `$ref`
 * into them (or to the schema's root, `"#"`) is rewritten to point there, so the refs
 * resolve against the document as a whole.
 */
class Components {
  readonly schemas: Record<string, JsonSchema> = {};

  /** The JSON Schema of `schema` ready for the document (`{}` when its library gives none). */
  add(schema: Schema | undefined, hint: string): JsonSchema {
    const json = jsonSchemaOf(schema);
    return json ? this.adopt(json, hint) : {};
  }

  adopt(json: JsonSchema, hint: string): JsonSchema {
    const { definitions, ...root } = json as JsonSchema & {
      definitions?: Record<string, JsonSchema>;
    };
    const names = new Map<string, string>();
    for (const name of Object.keys(definitions ?? {})) {
      names.set(name, this.reserve(/^__schema\d+$/.test(name) ? `${hint}.${name.slice(2)}` : name));
    }
    let rootName: string | undefined;
    const target = (ref: string): string => {
      if (ref === '#' || (ref.startsWith('#/') && !ref.startsWith('#/definitions/'))) {
        rootName ??= this.reserve(hint);
        return `#/components/schemas/${rootName}${ref.slice(1)}`;
      }
      if (!ref.startsWith('#/definitions/')) return ref;
      const [name = '', ...rest] = ref.slice('#/definitions/'.length).split('/');
      const renamed = names.get(name);
      return renamed ? ['#/components/schemas', renamed, ...rest].join('/') : ref;
    };
    const rewritten = rewriteRefs(root, target) as JsonSchema;
    for (const [name, definition] of Object.entries(definitions ?? {})) {
      this.schemas[names.get(name)!] = rewriteRefs(definition, target) as JsonSchema;
    }
    if (rootName) this.schemas[rootName] = rewritten;
    return rewritten;
  }

  /** The schema itself, or the component its root `$ref` names. */
  resolve(json: JsonSchema): JsonSchema {
    const ref = json['$ref'];
    const prefix = '#/components/schemas/';
    if (typeof ref !== 'string' || !ref.startsWith(prefix)) return json;
    return this.schemas[ref.slice(prefix.length)] ?? json;
  }

  /** A component name of its own: `[A-Za-z0-9._-]` only, suffixed when already taken. */
  private reserve(wanted: string): string {
    const base = wanted.replace(/[^A-Za-z0-9._-]/g, '_') || 'schema';
    let name = base;
    for (let i = 2; name in this.schemas || this.reserved.has(name); i++) name = `${base}_${i}`;
    this.reserved.add(name);
    return name;
  }

  private readonly reserved = new Set<string>();
}

/** Keywords whose values are data, not schemas: a `$ref` in them is not a reference. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples', 'example']);
/** Keywords whose values map names (which may be spelled like keywords) to schemas. */
const NAMED_SCHEMAS = new Set(['properties', 'patternProperties', 'definitions', '$defs']);

/** A copy of a JSON Schema with every `$ref` string passed through `target`. */
function rewriteRefs(value: unknown, target: (ref: string) => string): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, target));
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, member]): [string, unknown] => {
      if (DATA_KEYWORDS.has(key)) return [key, member];
      if (key === '$ref' && typeof member === 'string') return [key, target(member)];
      if (NAMED_SCHEMAS.has(key) && typeof member === 'object' && member !== null) {
        const named = Object.entries(member as Record<string, unknown>).map(([name, schema]) => [
          name,
          rewriteRefs(schema, target),
        ]);
        return [key, Object.fromEntries(named)];
      }
      return [key, rewriteRefs(member, target)];
    }),
  );
}

/**
 * An object schema becomes one descriptor per member; a tuple, one per position; any other
 * known schema, one "params". A schema whose library gives no JSON Schema is listed by its
 * paramOrder names (schema `{}`); without paramOrder nothing can be said of it: no params listed.
 */
function paramsOf(
  spec: { params?: Schema; paramOrder?: readonly string[] },
  components: Components,
  hint: string,
): { params: ContentDescriptor[]; structure: MethodObject['paramStructure'] } {
  if (!spec.params) return { params: [], structure: 'either' };
  const json = jsonSchemaOf(spec.params);
  if (!json) {
    return {
      params: (spec.paramOrder ?? []).map((name) => ({ name, schema: {} })),
      structure: 'either',
    };
  }
  const adopted = components.adopt(json, hint);
  const schema = components.resolve(adopted);
  const shape = shapeOf(schema);
  if (shape === 'object') {
    const properties = schema['properties'] as Record<string, JsonSchema>;
    const required = new Set((schema['required'] as string[] | undefined) ?? []);
    const order = spec.paramOrder ?? Object.keys(properties);
    const names = [...order, ...Object.keys(properties).filter((n) => !order.includes(n))];
    return {
      params: names.map((name) => ({
        name,
        required: required.has(name),
        schema: properties[name] ?? {},
      })),
      structure: spec.paramOrder ? 'either' : 'by-name',
    };
  }
  if (shape === 'tuple') {
    const items = schema['items'] as JsonSchema[];
    const minItems = typeof schema['minItems'] === 'number' ? schema['minItems'] : items.length;
    return {
      params: items.map((item, i) => ({ name: `arg${i}`, required: i < minItems, schema: item })),
      structure: 'by-position',
    };
  }
  // Neither an object nor a tuple (a variadic array, a union): one param named "params",
  // sent by name as {"params": ...}; the server unwraps it (see paramsValidator).
  return { params: [{ name: 'params', required: true, schema: adopted }], structure: 'by-name' };
}

function methodObject(name: string, spec: MethodSpec, components: Components): MethodObject {
  const { params, structure } = paramsOf(spec, components, `${name}.params`);
  const method: MethodObject = {
    name,
    paramStructure: structure,
    params,
    result: { name: 'result', schema: components.add(spec.result, `${name}.result`) },
  };
  if (spec.description) method.description = spec.description;
  return method;
}

/** A notification: a method object without a result (nothing answers a notification). */
function notificationObject(
  name: string,
  spec: NotificationSpec,
  components: Components,
): NotificationObject {
  const { params, structure } = paramsOf(spec, components, `${name}.params`);
  const notification: NotificationObject = { name, paramStructure: structure, params };
  if (spec.description) notification.description = spec.description;
  return notification;
}

function subscriptionObject(name: string, spec: SubscriptionSpec, components: Components) {
  const entry: OpenRpcDocument['x-subscriptions']['subscriptions'][number] = {
    name,
    params: paramsOf(spec, components, `${name}.params`).params,
    data: { name: 'data', schema: components.add(spec.data, `${name}.data`) },
  };
  if (spec.description) entry.description = spec.description;
  return entry;
}

/** The OpenRPC 1.3.2 document of a contract (served by `rpc.discover` and `GET /openrpc.json`). */
export function toOpenRpc(
  contract: Contract,
  subscriptionMethods: SubscriptionMethodNames,
): OpenRpcDocument {
  const info: OpenRpcDocument['info'] = { title: contract.name, version: contract.version };
  if (contract.description) info.description = contract.description;
  const components = new Components();
  const document: OpenRpcDocument = {
    openrpc: '1.3.2',
    info,
    methods: Object.entries(contract.methods).map(([name, spec]) =>
      methodObject(name, spec, components),
    ),
    'x-notifications': Object.entries(contract.notifications ?? {}).map(([name, spec]) =>
      notificationObject(name, spec, components),
    ),
    'x-client-methods': Object.entries(contract.clientMethods ?? {}).map(([name, spec]) =>
      methodObject(name, spec, components),
    ),
    'x-subscriptions': {
      methods: subscriptionMethods,
      subscriptions: Object.entries(contract.subscriptions ?? {}).map(([name, spec]) =>
        subscriptionObject(name, spec, components),
      ),
    },
  };
  if (Object.keys(components.schemas).length > 0) {
    document.components = { schemas: components.schemas };
  }
  return document;
}
