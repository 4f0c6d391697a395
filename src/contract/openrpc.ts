import type { StandardJSONSchemaV1 } from '@standard-schema/spec';
import type { Contract, MethodSpec, Schema, SubscriptionSpec } from './contract.js';

type JsonSchema = Record<string, unknown>;

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

export interface OpenRpcDocument {
  openrpc: '1.3.2';
  info: { title: string; version: string; description?: string };
  methods: MethodObject[];
  /** Extension: notifications the server sends. */
  'x-notifications': MethodObject[];
  /** Extension: methods the client implements and the server calls. */
  'x-client-methods': MethodObject[];
  /** Extension: subscriptions, with the three method names clients use for them. */
  'x-subscriptions': {
    methods: { subscribe: string; notification: string; unsubscribe: string };
    subscriptions: {
      name: string;
      description?: string;
      params: ContentDescriptor[];
      data: ContentDescriptor;
    }[];
  };
}

/**
 * JSON Schema of a Standard Schema, when its library provides one (Standard JSON
 * Schema, e.g. zod 4); otherwise `{}` ("anything"), which is still a valid document.
 */
function jsonSchemaOf(schema: Schema | undefined): JsonSchema {
  const converter = (schema?.['~standard'] as Partial<StandardJSONSchemaV1.Props> | undefined)
    ?.jsonSchema;
  if (!converter) return {};
  try {
    const { $schema: _ignored, ...rest } = converter.input({ target: 'draft-07' });
    return rest;
  } catch {
    return {};
  }
}

/** An object schema becomes one descriptor per member; a tuple, one per position; anything else, one "params". */
function paramsOf(spec: { params?: Schema; paramOrder?: readonly string[] }): {
  params: ContentDescriptor[];
  structure: MethodObject['paramStructure'];
} {
  if (!spec.params) return { params: [], structure: 'either' };
  const schema = jsonSchemaOf(spec.params);
  const properties = schema['properties'] as Record<string, JsonSchema> | undefined;
  if (schema['type'] === 'object' && properties) {
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
  const items = schema['items'];
  if (schema['type'] === 'array' && Array.isArray(items)) {
    const minItems = typeof schema['minItems'] === 'number' ? schema['minItems'] : items.length;
    return {
      params: (items as JsonSchema[]).map((item, i) => ({
        name: `arg${i}`,
        required: i < minItems,
        schema: item,
      })),
      structure: 'by-position',
    };
  }
  // Neither an object nor a tuple (a variadic array, a union): one param named "params",
  // sent by name as {"params": ...}; the server unwraps it (see paramsShape).
  return { params: [{ name: 'params', required: true, schema }], structure: 'by-name' };
}

/**
 * How a method's params are laid out in its OpenRPC description: members of an
 * object, positions of a tuple, or (anything else) one param named "params".
 */
export function paramsShape(schema: Schema | undefined): 'object' | 'tuple' | 'wrapped' | 'none' {
  if (!schema) return 'none';
  const json = jsonSchemaOf(schema);
  if (json['type'] === 'object' && json['properties']) return 'object';
  if (json['type'] === 'array' && Array.isArray(json['items'])) return 'tuple';
  return 'wrapped';
}

function methodObject(name: string, spec: MethodSpec): MethodObject {
  const { params, structure } = paramsOf(spec);
  const method: MethodObject = {
    name,
    paramStructure: structure,
    params,
    result: { name: 'result', schema: jsonSchemaOf(spec.result) },
  };
  if (spec.description) method.description = spec.description;
  return method;
}

function subscriptionObject(name: string, spec: SubscriptionSpec) {
  const entry: OpenRpcDocument['x-subscriptions']['subscriptions'][number] = {
    name,
    params: paramsOf(spec).params,
    data: { name: 'data', schema: jsonSchemaOf(spec.data) },
  };
  if (spec.description) entry.description = spec.description;
  return entry;
}

/** The OpenRPC 1.3.2 document of a contract (served by `rpc.discover` and `GET /openrpc.json`). */
export function toOpenRpc(
  contract: Contract,
  subscriptionMethods: { subscribe: string; notification: string; unsubscribe: string },
): OpenRpcDocument {
  const info: OpenRpcDocument['info'] = { title: contract.name, version: contract.version };
  if (contract.description) info.description = contract.description;
  return {
    openrpc: '1.3.2',
    info,
    methods: Object.entries(contract.methods).map(([name, spec]) => methodObject(name, spec)),
    'x-notifications': Object.entries(contract.notifications ?? {}).map(([name, spec]) =>
      methodObject(name, spec),
    ),
    'x-client-methods': Object.entries(contract.clientMethods ?? {}).map(([name, spec]) =>
      methodObject(name, spec),
    ),
    'x-subscriptions': {
      methods: subscriptionMethods,
      subscriptions: Object.entries(contract.subscriptions ?? {}).map(([name, spec]) =>
        subscriptionObject(name, spec),
      ),
    },
  };
}
