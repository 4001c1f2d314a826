import fc from 'fast-check';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupParameters } from '../../src/http/lookup.js';

/**
 * The lookup reads its two parameters itself (the fast path never builds a query object).
 * The reference is the query string parser every other route gets from Fastify: the same
 * names and values, a repeated parameter an array, whatever the encoding.
 */
describe('lookupParameters, against the query parser of Fastify', () => {
  const fastify = Fastify();
  fastify.get('/q', async (req) => {
    const query = req.query as Record<string, unknown>;
    return { processor_customer_id: query.processor_customer_id, hmac: query.hmac };
  });
  beforeAll(() => fastify.ready());
  afterAll(() => fastify.close());

  const reference = async (search: string) =>
    (await fastify.inject({ method: 'GET', url: `/q?${search}` })).json() as Record<string, unknown>;
  const ours = (search: string) => JSON.parse(JSON.stringify(lookupParameters(search))) as Record<string, unknown>;

  it.each([
    'processor_customer_id=cus_1&hmac=ab',
    'processor%5Fcustomer_id=cus%5F1&%68mac=AB',
    'hmac=a&hmac=b&hmac=c',
    'processor_customer_id=cus+1',
    'processor_customer_id=cus_%zz',
    'processor_customer_id',
    'processor_customer_id=',
    'processor_customer_id=a=b',
    '&&processor_customer_id=x&&',
    'processor_customer_id=cus_1;hmac=ab',
    'hmac+=x&hmac%20=y',
    '',
  ])('%s', async (search) => {
    expect(ours(search)).toEqual(await reference(search));
  });

  it('agrees on generated query strings', async () => {
    const piece = fc.constantFrom(
      'processor_customer_id',
      'hmac',
      '%68mac',
      'processor%5Fcustomer_id',
      '%70',
      '+',
      '%',
      '%zz',
      '%2B',
      '=',
      'cus_1',
      'x',
      '%E2%82%AC',
      '%C3',
    );
    const part = fc.array(piece, { maxLength: 4 }).map((p) => p.join(''));
    const search = fc.array(part, { maxLength: 6 }).map((parts) => parts.join('&'));
    await fc.assert(
      fc.asyncProperty(search, async (s) => {
        expect(ours(s), s).toEqual(await reference(s));
      }),
      { numRuns: 500, seed: 7 },
    );
  });
});
