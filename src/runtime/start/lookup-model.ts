import type { Logger } from 'pino';
import { ReadModel } from '../../readmodel/index.js';
import type { Siblings } from '../../readmodel/index.js';
import type { SecretBox } from '../../secrets/cipher.js';
import { openReadStore } from '../../store/index.js';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';

export interface LookupModel {
  model: ReadModel;
  close(): Promise<void>;
}

/**
 * The read model the lookup answers from: loaded (from the replica when DATABASE_READ_URL
 * is set) before the server listens, then kept true by the primary's change log.
 */
export async function openLookupModel(
  config: Config,
  store: Pick<Store, 'changes'>,
  secrets: SecretBox,
  log: Logger,
  siblings: Siblings | undefined,
): Promise<LookupModel> {
  const replica =
    config.databaseReadUrl === null
      ? null
      : await openReadStore(
          {
            engine: 'postgres',
            url: config.databaseReadUrl,
            queryTimeoutMs: config.dbQueryTimeoutMs,
            connectTimeoutMs: config.dbConnectTimeoutMs,
          },
          { secrets },
        );
  try {
    const model = await ReadModel.open(store.changes, {
      staleIfErrorMs: config.staleIfErrorMs,
      log,
      ...(replica ? { loadFrom: replica.changes } : {}),
      ...(siblings ? { siblings } : {}),
    });
    return {
      model,
      async close() {
        await model.close();
        await replica?.close();
      },
    };
  } catch (err) {
    await replica?.close();
    throw err;
  }
}
