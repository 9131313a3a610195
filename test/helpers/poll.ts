// Waiting for something another process, thread or timer does: polled, with a deadline that only
// matters when the thing never happens (tests assert what happened, never how long it took).

export interface PollOptions {
  /** Fail after this long; generous, since the machine may be loaded (default 30 s). */
  timeoutMs?: number;
  /** Between two probes (default 100 ms). */
  intervalMs?: number;
  /** A probe that throws means "not yet" (a server still starting) instead of failing at once. */
  retryErrors?: boolean;
  /** Names a reason to stop waiting at once (the process waited for has exited). */
  gone?: () => string | undefined;
}

/**
 * Polls `probe` until it returns something other than `undefined` or `false`, and returns that.
 * Fails with `what` (a function is read at that moment, to say what was seen last).
 */
export async function waitUntil<T>(what: string | (() => string), probe: () => Promise<T | undefined | false> | T | undefined | false, opts: PollOptions = {}): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100, retryErrors = false, gone = () => undefined } = opts;
  const deadline = Date.now() + timeoutMs;
  const name = () => (typeof what === 'string' ? what : what());
  for (;;) {
    try {
      const got = await probe();
      if (got !== undefined && got !== false) return got;
    } catch (err) {
      if (!retryErrors) throw err;
    }
    const reason = gone();
    if (reason) throw new Error(`${name()}: ${reason}`);
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${name()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Polls job `id`'s status view (as `read` fetches it) until its status is one of `statuses`; returns that view. */
export async function waitForJobStatus<J extends Record<string, any>>(id: string, read: () => Promise<J>, statuses: readonly string[], opts: PollOptions = {}): Promise<J> {
  let last: J | undefined;
  return waitUntil(
    () => `job ${id} still ${last?.status}`,
    async () => {
      last = await read();
      return statuses.includes(last.status) && last;
    },
    opts,
  );
}
