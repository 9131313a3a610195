import type { ApiProblem } from './api.ts';

/**
 * What each error code means to the person at the page, and what they can do about it.
 * The server's own detail is appended where it carries specifics (amounts, limits, the failing option).
 */
const MESSAGES: Record<string, string> = {
  network: 'The server could not be reached. Check your connection and that compressd is running, then try again.',
  aborted: 'The upload was stopped.',
  'request.invalid_content_type': 'The upload was not sent as a form. Reload the page and try again.',
  'request.no_files': 'No file arrived with the upload. Choose the file again.',
  'request.empty_file': 'This file is empty (0 bytes); there is nothing to compress.',
  'request.invalid_extension': 'This file type is not accepted by its compressor. Check the file extension.',
  'request.multiple_files': 'Only one file can be sent per job; the page sends them one by one — reload and try again.',
  'request.file_too_large': 'This file is larger than your plan allows.',
  'request.cross_origin': 'The server refused a request from another site. Open this page from the compressd server itself.',
  'request.unsupported_version': 'The server does not offer the API version this page asked for. Reload the page.',
  'compress.unsupported_format': 'This file format is not supported.',
  'compress.invalid_options': 'The chosen options were refused.',
  'compress.invalid_webhook': 'The webhook URL or secret was refused.',
  'estimate.unsupported_format': 'No compressor handles this format.',
  'estimate.invalid_size': 'The file size given for the estimate is not valid.',
  'schema.unsupported_format': 'This file format is not supported, so it has no options.',
  'url_fetch.missing_source_format': 'The source format of the URL was not given.',
  'url_fetch.invalid_url': 'The URL is missing or malformed.',
  'url_fetch.invalid_scheme': 'Only HTTPS URLs can be fetched.',
  'url_fetch.private_ip': 'The URL points to a private or reserved address and was blocked.',
  'url_fetch.mutually_exclusive': 'Send either a file or a URL, not both.',
  'url_fetch.output_url_reserved': 'An output URL cannot be given.',
  'url_fetch.http_error': 'The remote server answered with an error.',
  'url_fetch.dns_failure': 'The URL host name could not be resolved.',
  'url_fetch.timeout': 'The remote server was too slow.',
  'url_fetch.too_large': 'The remote file is larger than your plan allows.',
  'url_fetch.redirect_loop': 'The URL redirected too many times.',
  'url_fetch.redirect_denied': 'The URL redirected to a private or reserved address and was blocked.',
  'url_fetch.domain_circuit_open': 'That domain keeps failing and is blocked for a while. Try again later.',
  'url_fetch.url_expired': 'The presigned URL has expired.',
  'url_fetch.no_filename': 'No file name could be found for the URL.',
  'url_fetch.invalid_content': 'The remote server returned an empty response.',
  'url_fetch.guest_not_allowed': 'Guest keys cannot fetch URLs; use a key of a signed-in account.',
  'url_fetch.rate_limited': 'Too many URL fetches at once. Try again shortly.',
  'api_key.invalid_or_ip_not_allowed': 'The API key was refused: it is wrong, revoked, or not allowed from your IP address. Paste a valid key above.',
  'entitlements.insufficient_credits': 'Not enough credits for this file.',
  'jobs.forbidden': 'This job belongs to another account.',
  'jobs.not_found': 'The job no longer exists on the server (deleted, or forgotten after a long time).',
  'jobs.not_ready': 'The output is not ready yet.',
  'jobs.not_cancellable': 'The job had already finished, so it could not be canceled.',
  'jobs.not_deletable': 'The job is still queued or running; cancel it first.',
  'jobs.expired': 'The output was deleted after its retention period (1 hour). Compress the file again.',
  'jobs.timeout': 'Compression took longer than the time limit and was stopped.',
  'compare.not_ready': 'The comparison is available once the job has succeeded.',
  'compare.expired': 'The output was deleted after its retention period, so there is nothing to compare.',
  'compare.timeout': 'Making the preview took too long. Try again in a moment.',
  rate_limited: 'Too many requests from your address.',
  'queue.limit_exceeded': 'Too many jobs are queued for your account.',
  'server.internal_error': 'The server hit an unexpected error. Try again; if it keeps happening, check the server log.',
  'route.not_found': 'This server does not offer that endpoint (it may be an older version).',
  'ui.unavailable': 'The page could not be built on the server.',
};

/** Job failure codes other than the API's own: a compressor's reason, shown with its detail. */
const JOB_FAILURES: Record<string, string> = {
  'jobs.canceled': 'The job was canceled.',
  'jobs.internal_error': 'The server could not finish this job.',
  'jobs.disk_full': 'The server ran out of disk space.',
  'jobs.unknown_compressor': 'The server has no compressor for this file.',
  'image.empty': 'The image is empty.',
  'image.decode_failed': 'The image could not be read; it may be damaged.',
  'image.format_mismatch': 'The file content does not match its extension.',
  'raw.unsupported': 'This camera RAW file is not supported.',
  'raw.no_image_data': 'This camera RAW file holds no usable image.',
  'pdf.damaged': 'The PDF is damaged.',
  'pdf.encrypted': 'The PDF is password-protected.',
  'office.damaged': 'The document is damaged.',
  'office.encrypted': 'The document is password-protected.',
  'office.not_ooxml': 'This is not a DOCX or PPTX document.',
  'office.zip_bomb': 'The document expands to an unsafe size and was refused.',
  'office.unsafe_entry_name': 'The document contains an unsafe file name and was refused.',
};

const FORMAT_VALIDATION = /^compress\.([a-z0-9]+)\.validation\.unsupported_format$/;

function withDetail(base: string, detail: string | null | undefined): string {
  if (!detail) return base;
  const d = detail.trim();
  return base.toLowerCase().includes(d.toLowerCase()) ? base : `${base} ${d.endsWith('.') ? d : `${d}.`}`;
}

function retryHint(p: ApiProblem): string {
  return p.retryAfter === null ? '' : ` Retrying in ${Math.ceil(p.retryAfter)} s.`;
}

/** The sentence to show for an API error. Codes the page does not know still show the server's detail. */
export function messageFor(p: ApiProblem): string {
  const formatSpecific = FORMAT_VALIDATION.exec(p.code);
  if (formatSpecific) return withDetail(`The ${formatSpecific[1].toUpperCase()} compressor does not accept this file.`, p.detail);
  const base = MESSAGES[p.code];
  if (p.code === 'request.file_too_large' && typeof p.body.megabytes === 'number') {
    return `${base} The limit is ${p.body.megabytes} MB.`;
  }
  if (p.code === 'compress.unsupported_format' || p.code === 'schema.unsupported_format') {
    const list = Array.isArray(p.body.supportedFormats) ? (p.body.supportedFormats as string[]).map((f) => f.replace(/^\./, '')).join(', ') : '';
    return list ? `${base} Supported: ${list}.` : base;
  }
  if (p.code === 'rate_limited' || p.code === 'queue.limit_exceeded') return base + retryHint(p);
  if (p.code === 'jobs.not_found' || p.code === 'api_key.invalid_or_ip_not_allowed' || p.code === 'network') return base;
  if (base) return withDetail(base, p.detail);
  if (p.status >= 500) return withDetail(MESSAGES['server.internal_error'], p.detail);
  return p.detail ? `${p.detail} (${p.code})` : `The request failed (${p.code}).`;
}

/** The sentence for a Failed job's `error`. */
export function jobFailureMessage(error: { code?: string; detail?: string } | null): string {
  if (!error) return 'Compression failed.';
  const base = (error.code && (MESSAGES[error.code] ?? JOB_FAILURES[error.code])) || 'Compression failed.';
  return withDetail(base, error.detail);
}
