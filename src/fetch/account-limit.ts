/** Counts the URL downloads each account has in flight. */
export class ConcurrencyLimit {
  private readonly active = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** A release function, or undefined when `key` already has `max` in flight. */
  tryAcquire(key: string): (() => void) | undefined {
    const n = this.active.get(key) ?? 0;
    if (n >= this.max) return undefined;
    this.active.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.active.get(key) ?? 1) - 1;
      if (left <= 0) this.active.delete(key);
      else this.active.set(key, left);
    };
  }
}
