import { createHash } from 'node:crypto';

/** The CSP source that allows one inline `<script>` or `<style>` element, by the hash of its text. */
export const inlineSource = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * The headers of an HTML page this server serves: it may load only the scripts, styles and images
 * named and talk only to this server; no framing (clickjacking), no type sniffing, no referrer.
 */
export function pageHeaders(sources: { script: string; style: string; img?: string }): Record<string, string> {
  const img = sources.img ? ` img-src ${sources.img};` : '';
  return {
    'content-security-policy': `default-src 'none'; script-src ${sources.script}; style-src ${sources.style};${img} connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  };
}
