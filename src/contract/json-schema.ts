import type { StandardJSONSchemaV1 } from '@standard-schema/spec';
import type { Schema } from './contract.js';

export type JsonSchema = Record<string, unknown>;

/**
 * JSON Schema (draft-07) of what a Standard Schema accepts, when its library provides one
 * (Standard JSON Schema, e.g. zod 4); `undefined` when it does not. Members the library
 * cannot represent (zod: a `z.date()`) become `{}` rather than hiding the whole schema
 * (`libraryOptions: { unrepresentable: 'any' }`, zod's option; other libraries ignore it).
 */
export function jsonSchemaOf(schema: Schema | undefined): JsonSchema | undefined {
  const converter = (schema?.['~standard'] as Partial<StandardJSONSchemaV1.Props> | undefined)
    ?.jsonSchema;
  if (!converter) return undefined;
  try {
    const { $schema: _ignored, ...rest } = converter.input({
      target: 'draft-07',
      libraryOptions: { unrepresentable: 'any' },
    });
    return rest;
  } catch {
    return undefined;
  }
}

/** The schema itself, or the definition its root `$ref` points to (`{"$ref": "#/definitions/X", ...}`). */
export function resolveRoot(json: JsonSchema): JsonSchema {
  const ref = json['$ref'];
  const definitions = json['definitions'] as Record<string, JsonSchema> | undefined;
  const prefix = '#/definitions/';
  if (typeof ref === 'string' && ref.startsWith(prefix) && definitions) {
    return definitions[ref.slice(prefix.length)] ?? json;
  }
  return json;
}

/**
 * How a params schema is laid out, as its OpenRPC description shows it: members of an
 * object, positions of a tuple, or (any other known schema) one param named "params";
 * `unknown` when the library gives no JSON Schema, so nothing is known of its shape.
 */
export type ParamsShape = 'none' | 'object' | 'tuple' | 'wrapped' | 'unknown';

export function shapeOf(json: JsonSchema | undefined): Exclude<ParamsShape, 'none'> {
  if (!json) return 'unknown';
  const root = resolveRoot(json);
  if (root['type'] === 'object' && root['properties']) return 'object';
  if (root['type'] === 'array' && Array.isArray(root['items'])) return 'tuple';
  return 'wrapped';
}

export function paramsShape(schema: Schema | undefined): ParamsShape {
  return schema ? shapeOf(jsonSchemaOf(schema)) : 'none';
}

/** An object params schema's members, as its JSON Schema lists them. */
export interface ObjectMembers {
  names: string[];
  required: string[];
}

/**
 * The members of an object params schema; 'tuple' for a tuple's; undefined when the library gives
 * no JSON Schema, or it is another shape (a union, a record), whose members it does not list.
 */
export function objectMembers(schema: Schema | undefined): ObjectMembers | 'tuple' | undefined {
  const json = jsonSchemaOf(schema);
  const shape = shapeOf(json);
  if (shape === 'tuple') return 'tuple';
  if (shape !== 'object') return undefined;
  const root = resolveRoot(json!);
  const required = root['required'];
  return {
    names: Object.keys(root['properties'] as JsonSchema),
    required: Array.isArray(required) ? required.filter((n) => typeof n === 'string') : [],
  };
}
