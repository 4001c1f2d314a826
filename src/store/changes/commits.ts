import { outsideRequestBounds } from '../db/deadline.js';

/**
 * This instance's own commits that may change a lookup's answer: each role that writes one
 * emits it, and the change log's readers hear of it at once (other instances through NOTIFY).
 */
export class Commits {
  private readonly listeners = new Set<() => void>();

  onCommit(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * After a commit: this instance learns of its own writes at once, others through NOTIFY.
   * What the listeners set off (a catch-up, a delivery) is not the request's: it runs
   * outside the bound of the request that committed.
   */
  emit(): void {
    outsideRequestBounds(() => {
      for (const listener of this.listeners) listener();
    });
  }
}
