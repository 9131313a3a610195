import { createHmac } from 'node:crypto';
import { systemClock } from '../clock.ts';

/**
 * The X-Service-Signature header value for one delivery attempt: Stripe's scheme,
 * `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, no spaces.
 * `t` is the attempt's send time, so every retry is signed afresh.
 */
export function sign(secret: string, body: string | Uint8Array, t: number = Math.floor(systemClock().getTime() / 1000)): string {
  const v1 = createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');
  return `t=${t},v1=${v1}`;
}
