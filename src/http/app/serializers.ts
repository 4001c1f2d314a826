import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * Fastify's response serializers, compiled once per process for each response schema rather
 * than once per app: compiling a schema into its serializer (fast-json-stringify generates
 * and evaluates code) is most of what an app's `ready()` costs, and the schemas are module
 * constants, the same objects in every app a process builds (the service builds one, the
 * tests hundreds). Compiled by Fastify's own default compiler, so each serializer is the
 * one Fastify would have built.
 */
const defaultFactory = SerializerSelector();

type Serializer = ReturnType<ReturnType<SerializerFactory>>;

/** Per external schemas and options (as JSON), then per response schema object, status and content type. */
const compiled = new Map<string, WeakMap<object, Map<string, Serializer>>>();

export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = defaultFactory(externalSchemas, options);
  const key = JSON.stringify([externalSchemas, options]);
  let bySchema = compiled.get(key);
  if (bySchema === undefined) {
    bySchema = new WeakMap();
    compiled.set(key, bySchema);
  }
  const schemas = bySchema;
  return (route) => {
    const schema: unknown = route.schema;
    if (typeof schema !== 'object' || schema === null) return compile(route);
    let byPart = schemas.get(schema);
    if (byPart === undefined) {
      byPart = new Map();
      schemas.set(schema, byPart);
    }
    const part = `${route.httpStatus ?? ''} ${(route as { contentType?: string }).contentType ?? ''}`;
    let serializer = byPart.get(part);
    if (serializer === undefined) {
      serializer = compile(route);
      byPart.set(part, serializer);
    }
    return serializer;
  };
};
