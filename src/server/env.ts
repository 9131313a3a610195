import type { HttpBindings } from '@hono/node-server';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/registry.ts';

export interface AppEnv {
  Bindings: HttpBindings;
  Variables: { principal: Principal; version: number; clientIp: string; requestId: string; log: Logger };
}
