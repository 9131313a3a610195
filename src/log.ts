import { pino, type Logger } from 'pino';

/** JSON logs on stdout; secrets are redacted wherever they might appear. */
export function createLogger(level = process.env.COMPRESSD_LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { service: 'compressd' },
    redact: ['req.headers["x-service-api-key"]', 'webhook.secret', '*.webhookSecret', 'token', '*.token'],
  });
}
