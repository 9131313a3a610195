import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';

const requestScope = new AsyncLocalStorage<string>();
const inFlight = new Set<string>();

/**
 * Runs a request's handling in its scope, so an error escaping from a callback created while
 * serving it (a timer, a file stream, a worker call) is traced to the request's id. Events of
 * the request's own socket run in the connection's context instead; for those the fatal log
 * names every request in flight.
 */
export async function inRequestScope<T>(requestId: string, fn: () => Promise<T>): Promise<T> {
  inFlight.add(requestId);
  try {
    return await requestScope.run(requestId, fn);
  } finally {
    inFlight.delete(requestId);
  }
}

export interface FatalDeps {
  log: Logger;
  /** Stops accepting and finishes what it can within `graceMs` (the graceful shutdown). */
  close(graceMs: number): Promise<void>;
  graceMs: number;
  exit(code: number): void;
}

/**
 * The last line of defence for an error nothing else handled (`uncaughtException`,
 * `unhandledRejection`). The process state is no longer trusted, so it does not keep serving:
 * the error is logged with its request id and stack, the server stops accepting, running jobs
 * get the usual grace period, and the process exits 1 for its supervisor to restart it; the
 * job journal's recovery takes over on the next start. A second fatal error while draining
 * is logged and does not start another drain; a drain that hangs is cut off after the grace.
 */
export function fatalErrorHandler(deps: FatalDeps): (err: unknown, origin: string) => void {
  let draining = false;
  return (err, origin) => {
    const requestId = requestScope.getStore() ?? null;
    const error = err instanceof Error ? err : new Error(`non-error value thrown: ${String(err)}`);
    deps.log.fatal({ err: error, origin, requestId, requestsInFlight: [...inFlight] }, draining ? 'another uncaught error while shutting down' : 'uncaught error: shutting down for a restart');
    if (draining) return;
    draining = true;
    const cutOff = setTimeout(() => deps.exit(1), deps.graceMs + 5_000);
    cutOff.unref();
    deps.close(deps.graceMs).then(
      () => deps.exit(1),
      (closeErr) => {
        deps.log.error({ err: closeErr }, 'shutdown after an uncaught error failed');
        deps.exit(1);
      },
    );
  };
}
