import type { HttpBindings } from '@hono/node-server';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/registry.ts';
import type { UploadPlace } from './upload-slots.ts';

export interface AppEnv {
  Bindings: HttpBindings;
  /** `upload`: set on the submission routes by `uploadGate`. */
  Variables: { principal: Principal; version: number; clientIp: string; requestId: string; log: Logger; upload: UploadPlace };
}
