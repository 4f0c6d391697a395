import { createRequire } from 'node:module';
import { Ajv } from 'ajv';
import type { AnySchemaObject, ValidateFunction } from 'ajv';

const require = createRequire(import.meta.url);

/** The OpenRPC meta-schema as @open-rpc/meta-schema ships it (its typings omit the value). */
export const openrpcMetaSchema = (
  require('@open-rpc/meta-schema') as { openrpcDocument: AnySchemaObject }
).openrpcDocument;

const draft07 = require('ajv/dist/refs/json-schema-draft-07.json') as AnySchemaObject & {
  definitions: Record<string, unknown>;
  properties: Record<string, unknown>;
};

/**
 * An ajv validator for OpenRPC documents, with the meta-schema used whole.
 *
 * - The meta-schema's `$schema`, and the target of its JSONSchema definition, is
 *   json-schema-tools' meta-schema (https://meta.json-schema.tools), which is JSON
 *   Schema draft-07 reorganised; it is not shipped with @open-rpc/meta-schema nor
 *   installed here. ajv's own draft-07 meta-schema stands in for it, registered under
 *   both spellings of that id the meta-schema uses (with and without the trailing
 *   slash), plus the one definition the meta-schema points into by path
 *   (`JSONSchemaObject/properties/$ref`, in json-schema-tools draft-07's `$ref` member).
 *   So every `schema` in a document is checked against draft-07's meta-schema.
 * - `strictSchema: false`: the meta-schema puts `additionalItems: false` beside a
 *   single-schema `items`, which draft-07 ignores and ajv's strict mode refuses to
 *   compile. Turning that lint off changes no validation result.
 * - The formats the schemas use (uri, uri-reference, regex) are checked for real,
 *   not ignored.
 */
export function openrpcValidator(): ValidateFunction {
  const ajv = new Ajv({ strictSchema: false, allErrors: true });
  ajv.addFormat('uri', (value: string) => /^[a-z][a-z\d+.-]*:/i.test(value) && URL.canParse(value));
  ajv.addFormat('uri-reference', (value: string) => URL.canParse(value, 'http://base.invalid/'));
  ajv.addFormat('regex', (value: string) => {
    try {
      new RegExp(value, 'u');
      return true;
    } catch {
      return false;
    }
  });
  for (const id of ['https://meta.json-schema.tools/', 'https://meta.json-schema.tools']) {
    ajv.addMetaSchema({
      ...draft07,
      $id: id,
      definitions: {
        ...draft07.definitions,
        JSONSchemaObject: { properties: { $ref: draft07.properties['$ref'] } },
      },
    });
  }
  return ajv.compile(openrpcMetaSchema);
}
