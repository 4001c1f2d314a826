import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';

const ROOT = resolve(import.meta.dirname, '../..');

describe('the OpenAPI document', () => {
  let store: Store;
  let app: App;
  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  it('is what /openapi.json serves, and what the build wrote to dist/openapi.json', async () => {
    const served = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Record<string, unknown>;
    expect(served).toEqual(await openApiDocument());
    const file = join(ROOT, 'dist', 'openapi.json');
    if (existsSync(file) || process.env.CI === 'true') expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(served);
  });

  it('names every operation once, says how each is authenticated, and documents its refusals', async () => {
    const doc = (await openApiDocument()) as {
      paths: Record<
        string,
        Record<string, { operationId?: string; security?: unknown[]; responses: Record<string, unknown> }>
      >;
    };
    const ops = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, ...op })),
    );
    expect(ops.length).toBeGreaterThan(10);
    const ids = ops.map((o) => o.operationId);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const op of ops) {
      expect(Array.isArray(op.security), op.where).toBe(true);
      // Every surface is rate limited.
      expect(Object.keys(op.responses), op.where).toContain('429');
    }
    const preflight = ops.find((o) => o.where === 'OPTIONS /api/subscriber-status/{tenantSlug}');
    expect(Object.keys(preflight?.responses ?? {})).toContain('204');
    expect(Object.keys(preflight?.responses ?? {})).not.toContain('200');
    const webhook = ops.find((o) => o.where === 'POST /webhooks/stripe/{tenantSlug}') as
      { parameters?: { in: string; name: string }[] } | undefined;
    expect(webhook?.parameters?.some((p) => p.in === 'header' && p.name === 'stripe-signature')).toBe(true);
  });

  it('refuses U+0000 in every string the admin API takes (the store cannot hold it), by a pattern, a format or a closed list', async () => {
    const doc = (await openApiDocument()) as {
      paths: Record<
        string,
        Record<
          string,
          { tags?: string[]; parameters?: { in: string; name: string; schema: unknown }[]; requestBody?: unknown }
        >
      >;
    };
    const open: string[] = [];
    let strings = 0;
    /** Every string schema under `node`, with where it is. */
    const walk = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}[${i}]`));
      if (typeof node !== 'object' || node === null) return;
      const schema = node as Record<string, unknown>;
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (types.includes('string')) {
        strings += 1;
        const pattern = typeof schema.pattern === 'string' ? new RegExp(schema.pattern, 'u') : null;
        const closed = schema.format !== undefined || schema.enum !== undefined || schema.const !== undefined;
        if (!closed && (pattern === null || pattern.test('a\u0000'))) open.push(where);
      }
      for (const [key, value] of Object.entries(schema))
        if (key !== 'examples' && key !== 'example') walk(value, `${where}.${key}`);
    };
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        if (!path.startsWith('/admin/')) continue;
        for (const p of op.parameters ?? [])
          if (p.in !== 'header') walk(p.schema, `${method} ${path} ${p.in} ${p.name}`);
        walk(op.requestBody, `${method} ${path} body`);
      }
    }
    expect(strings).toBeGreaterThan(30);
    expect(open).toEqual([]);
  });
});
