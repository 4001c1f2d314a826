import type { SecretBox } from '../../secrets/cipher.js';
import type { Db, ListenHandlers } from '../db/db.js';
import type { Commits } from './commits.js';
import { loadLookupState, lookupChangesSince, pruneLookupChanges } from './lookup-changes.js';
import type { ChangeLog, ChangePosition, LookupChanges, LookupStateSink } from './types.js';

/** The change notifications' channel in the `public` schema; elsewhere it names the schema too (migration 007). */
export const CHANGES_CHANNEL = 'dunwall_invalidate';

/** The change log in SQL: snapshots, the changes since a position, and the notifications that wake its readers. */
export class SqlChangeLog implements ChangeLog {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
    private readonly commits: Commits,
  ) {}

  onCommit(listener: () => void): () => void {
    return this.commits.onCommit(listener);
  }

  /** Listens on the channel of the schema the tables live in (migration 007). */
  async listenForChanges(handlers: ListenHandlers): Promise<() => Promise<void>> {
    const [row] = await this.db.query<{ channel: string }>('SELECT dunwall_changes_channel() AS channel');
    return this.db.listen(row?.channel ?? CHANGES_CHANNEL, handlers);
  }

  loadLookupState(sink: LookupStateSink): Promise<ChangePosition> {
    return loadLookupState(this.db, this.secrets, sink);
  }

  lookupChangesSince(since: ChangePosition): Promise<LookupChanges> {
    return lookupChangesSince(this.db, this.secrets, since);
  }

  pruneLookupChanges(olderThanMs: number): Promise<number> {
    return pruneLookupChanges(this.db, olderThanMs);
  }
}
