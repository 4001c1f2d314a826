import { Type } from 'typebox';
import { NAMED_FLAGS } from '../../domain/types.js';
import type { TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { presentTier } from '../presenters.js';
import { AdminHeaders, ProblemRef, PutTierBody, Tier, TierList, TierParams } from '../schemas.js';
import { invalid } from './common.js';

/** The operator's tiers (/admin/v1/tiers): the entitlements a tenant's answers carry. */
export interface TierRoutesOptions {
  tenants: Pick<TenantStore, 'listTiers' | 'putTier' | 'deleteTier'>;
  now: () => number;
}

const problemRef = ProblemRef;
const errors = { 400: problemRef, 401: problemRef, 404: problemRef, 429: problemRef };

export async function tierRoutes(app: App, opts: TierRoutesOptions): Promise<void> {
  const { tenants } = opts;
  const now = () => new Date(opts.now());
  const common = { tags: ['admin'], security: [{ adminToken: [] }], headers: AdminHeaders };

  app.get(
    '/tiers',
    {
      schema: {
        ...common,
        operationId: 'listTiers',
        summary: 'List tiers',
        response: { 200: TierList, 401: problemRef, 429: problemRef },
      },
    },
    async () => ({
      data: (await tenants.listTiers()).map(presentTier),
    }),
  );

  app.put(
    '/tiers/:name',
    {
      schema: {
        ...common,
        operationId: 'putTier',
        summary: 'Create or replace a tier',
        params: TierParams,
        body: PutTierBody,
        response: { 200: Tier, ...errors },
      },
    },
    async (req) => {
      for (const flag of NAMED_FLAGS) {
        if (req.body.entitlements[flag] === undefined) throw invalid(`entitlements.${flag}`, 'is required');
      }
      return presentTier(await tenants.putTier(req.params.name, req.body.entitlements, now()));
    },
  );

  app.delete(
    '/tiers/:name',
    {
      schema: {
        ...common,
        operationId: 'deleteTier',
        summary: 'Delete a tier no tenant is on',
        params: TierParams,
        response: { 204: Type.Null({ description: 'Deleted' }), 409: problemRef, ...errors },
      },
    },
    async (req, reply) => {
      const result = await tenants.deleteTier(req.params.name);
      if (result === 'not_found') throw new AppError('tier_not_found');
      if (result === 'in_use') throw new AppError('tier_in_use');
      return reply.code(204).send(null);
    },
  );
}
