import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What a database query or storage request was made for:
 * - `admission`: a `POST` that submits a job (auth, the checks before the body, storing the input, the admit move);
 * - `run`: a job this node claimed, from the claim to its end (lease renewals, progress, input and output, the end move);
 * - `poll`: looking for work (a claim that found nothing, requeueing expired leases);
 * - `request`: every other HTTP request (status, download, compare, metrics);
 * - `background`: the rest (start-up recovery, the retention sweep, webhook deliveries).
 */
export type IoPath = 'admission' | 'run' | 'poll' | 'request' | 'background';

/** Where counts go: the node's metrics. */
export interface IoSink {
  dbQuery(path: IoPath): void;
  dbConnect(path: IoPath): void;
  s3Request(path: IoPath, command: string): void;
}

/** A scope whose path is known, or not yet (`path` null: counts wait in `pending` until it is). */
interface Scope {
  path: IoPath | null;
  pending: ((path: IoPath) => void)[];
}

const scopes = new AsyncLocalStorage<Scope>();

/** Runs `fn` with every query and request it causes (also later, from timers it sets) counted under `path`. */
export function withIoPath<T>(path: IoPath, fn: () => T): T {
  return scopes.run({ path, pending: [] }, fn);
}

/**
 * Runs `fn` and counts what it caused under the path its result names: a claim that found a job is
 * part of that job's run, one that found nothing is polling.
 */
export async function withIoPathOf<T>(pathOf: (result: T | undefined) => IoPath, fn: () => Promise<T>): Promise<T> {
  const scope: Scope = { path: null, pending: [] };
  let result: T | undefined;
  try {
    result = await scopes.run(scope, fn);
    return result;
  } finally {
    scope.path = pathOf(result);
    for (const count of scope.pending.splice(0)) count(scope.path);
  }
}

/** Counts one event under the path of the current scope. */
export function countIo(count: (path: IoPath) => void): void {
  const scope = scopes.getStore();
  if (!scope) count('background');
  else if (scope.path) count(scope.path);
  else scope.pending.push(count);
}

/** `fn` bound to the current scope, for callbacks that arrive from outside it (worker messages). */
export function inIoScope<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
  return AsyncLocalStorage.bind(fn);
}
