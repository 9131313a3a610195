import type { RouterRoute } from 'hono/types';
import { TrieRouter } from 'hono/router/trie-router';

/**
 * The methods a path is served with, read from the app's own route list (middleware, registered
 * as `ALL`, does not count). HEAD is listed with GET because Hono answers it from the GET route.
 * The list is built on first use, once every route is registered.
 */
export function allowedMethods(routes: () => readonly RouterRoute[]): (path: string) => string[] {
  let router: TrieRouter<string> | undefined;
  return (path) => {
    if (!router) {
      router = new TrieRouter<string>();
      for (const r of routes()) if (r.method !== 'ALL') router.add('ALL', r.path, r.method);
    }
    const methods = new Set(router.match('GET', path)[0].map(([method]) => method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  };
}
