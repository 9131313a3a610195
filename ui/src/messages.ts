import type { ApiProblem } from './problem.ts';
import { formatBytes } from './format.ts';

interface Message {
  /** What happened and what the person can do, in plain words. */
  text: string;
  /** Trying the same file again can succeed (a busy or restarted server, a dropped connection). */
  retry?: boolean;
  /** The server's detail names something the person needs (the refused option, the credits missing). */
  detail?: boolean;
}

/**
 * The one table of what each error code means to the person at the page — API errors and the
 * reasons a job failed alike. The codes stay in the API; compressor and library wording
 * ("VipsJpeg: premature end…") never reaches the page.
 */
const MESSAGES: Record<string, Message> = {
  network: { text: 'The server could not be reached. Check your connection and that compressd is running.', retry: true },
  aborted: { text: 'The upload was stopped.', retry: true },
  'request.invalid_content_type': { text: 'The upload was not sent as a form. Reload the page and try again.' },
  'request.no_files': { text: 'No file arrived with the upload. Choose the file again.' },
  'request.empty_file': { text: 'This file is empty: there is nothing to compress.' },
  'request.invalid_extension': { text: 'The file name’s extension does not match a type this server compresses.' },
  'request.multiple_files': { text: 'Only one file can be sent per job. Reload the page and try again.' },
  'request.file_too_large': { text: 'This file is larger than this server’s limit.' },
  'request.cross_origin': { text: 'The server refused a request from another site. Open this page from the compressd server itself.' },
  'request.unsupported_version': { text: 'The server does not offer the API version this page asked for. Reload the page.' },
  'compress.unsupported_format': { text: 'This type of file is not supported. The supported formats are listed under the drop zone.' },
  'schema.unsupported_format': { text: 'This type of file is not supported. The supported formats are listed under the drop zone.' },
  'estimate.unsupported_format': { text: 'This type of file is not supported.' },
  'compress.invalid_options': { text: 'The chosen options were refused.', detail: true },
  'compress.invalid_webhook': { text: 'The webhook address or secret was refused.' },
  'api_key.invalid_or_ip_not_allowed': { text: 'This key was refused: it is wrong, revoked, or not allowed from your network.' },
  'entitlements.insufficient_credits': { text: 'Not enough credits left for this file.', detail: true },
  'jobs.forbidden': { text: 'This file was compressed with another account’s key.' },
  'jobs.not_found': { text: 'This job is no longer on the server (deleted, or forgotten after its time ran out).' },
  'jobs.not_ready': { text: 'The result is not ready yet.', retry: true },
  'jobs.not_cancellable': { text: 'The job had already finished, so it could not be stopped.' },
  'jobs.not_deletable': { text: 'The job is still running; stop it first.' },
  'jobs.expired': { text: 'The result was deleted when its hour on the server ran out. Compress the file again.' },
  'compare.not_ready': { text: 'The comparison is ready once the file is compressed.' },
  'compare.expired': { text: 'The result was deleted when its hour on the server ran out, so there is nothing to compare.' },
  'compare.timeout': { text: 'Making the preview took too long. Try again in a moment.', retry: true },
  'compare.unavailable': { text: 'There is no picture in this file to compare.' },
  'compare.invalid_query': { text: 'That page does not exist in this document.' },
  'compare.too_large': { text: 'This page is too complex to preview.' },
  'compare.busy': { text: 'The server is busy making other previews. Try again in a moment.', retry: true },
  rate_limited: { text: 'The server is busy with your earlier requests.', retry: true },
  'queue.limit_exceeded': { text: 'Too many of your files are waiting on the server.', retry: true },
  'server.internal_error': { text: 'The server hit an unexpected error. Try again; if it keeps happening, the server log says why.', retry: true },
  'server.unavailable': { text: 'The server is starting or stopping. Try again in a moment.', retry: true },
  'route.not_found': { text: 'This server does not offer that (it may be an older version).' },
  'ui.unavailable': { text: 'The page could not be built on the server.' },
  // Why a job failed.
  'jobs.canceled': { text: 'Stopped before it finished.', retry: true },
  'jobs.timeout': { text: 'Compressing took longer than this server’s time limit.', retry: true },
  'jobs.internal_error': { text: 'The server could not finish this file.', retry: true },
  'jobs.worker_error': { text: 'The server could not finish this file.', retry: true },
  'jobs.worker_crashed': { text: 'The server could not finish this file.', retry: true },
  'jobs.crashed': { text: 'This file stopped the server each time it was compressed, so it was given up.' },
  'jobs.lease_lost': { text: 'The server restarted while compressing this file.', retry: true },
  'jobs.aborted': { text: 'The server stopped while compressing this file.', retry: true },
  'jobs.input_missing': { text: 'The uploaded file was lost on the server.', retry: true },
  'jobs.disk_full': { text: 'The server ran out of disk space.', retry: true },
  'jobs.unknown_compressor': { text: 'This server has no compressor for this file.' },
  'image.empty': { text: 'The picture is empty.' },
  'image.decode_failed': { text: 'The picture could not be read: the file is damaged or not what its name says.' },
  'image.truncated': { text: 'The picture is cut short: the file is incomplete or damaged.' },
  'image.unsupported_variant': { text: 'This variant of the format is not supported.' },
  'image.format_mismatch': { text: 'The file’s content does not match its name (for example a PNG named .jpg). Rename it and try again.' },
  'image.too_many_pixels': { text: 'The picture has more pixels than this server’s limit.' },
  'raw.unsupported': { text: 'This camera’s RAW files are not supported.' },
  'raw.no_image_data': { text: 'This RAW file holds no picture.' },
  'pdf.damaged': { text: 'The PDF is damaged and could not be read.' },
  'pdf.encrypted': { text: 'The PDF is password-protected. Remove the password and try again.' },
  'office.damaged': { text: 'The document is damaged and could not be read.' },
  'office.encrypted': { text: 'The document is password-protected. Remove the password and try again.' },
  'office.not_ooxml': { text: 'This is not a Word (DOCX) or PowerPoint (PPTX) document.' },
  'office.zip_bomb': { text: 'The document unpacks to an unsafe size and was refused.' },
  'office.unsafe_entry_name': { text: 'The document holds an unsafe file name and was refused.' },
};

const FORMAT_VALIDATION = /^compress\.([a-z0-9]+)\.validation\.unsupported_format$/;

export interface Explained {
  text: string;
  retry: boolean;
}

/** Looks a code up; unknown codes fall back on the status (5xx can pass on retry) and the server's own words. */
function explain(code: string, status: number, detail: string | null | undefined): Explained {
  const known = MESSAGES[code];
  if (known) return { text: known.detail && detail ? `${known.text} ${sentence(detail)}` : known.text, retry: known.retry === true };
  const format = FORMAT_VALIDATION.exec(code);
  if (format) return { text: `This file is not a valid ${format[1].toUpperCase()} file.`, retry: false };
  if (status === 429 || status === 503) return { text: 'The server is busy.', retry: true };
  if (status >= 500) return { text: MESSAGES['server.internal_error'].text, retry: true };
  return { text: detail ? sentence(detail) : `The request was refused (${code}).`, retry: false };
}

const sentence = (s: string) => (/[.!?]$/.test(s.trim()) ? s.trim() : `${s.trim()}.`);

/** The sentence and whether Retry makes sense, for an API error. */
export function explainProblem(p: ApiProblem): Explained {
  const out = explain(p.code, p.status, p.detail);
  if (p.code === 'request.file_too_large') {
    const bytes = typeof p.body.maxFileSizeBytes === 'number' ? p.body.maxFileSizeBytes : typeof p.body.megabytes === 'number' ? p.body.megabytes * 1048576 : null;
    if (bytes !== null) out.text = `This file is larger than this server’s limit of ${formatBytes(bytes)}.`;
  }
  if (out.retry && p.retryAfter !== null && p.retryAfter > 0) out.text += ` Trying again in ${Math.ceil(p.retryAfter)} s.`;
  return out;
}

export const messageFor = (p: ApiProblem): string => explainProblem(p).text;

/** The sentence and whether Retry makes sense, for a Failed job's `error`. */
export function explainFailure(error: { code?: string; detail?: string } | null): Explained {
  if (error?.code && (MESSAGES[error.code] || FORMAT_VALIDATION.test(error.code))) return explain(error.code, 0, error.detail);
  return { text: 'This file could not be compressed.', retry: false };
}
