// The web page's message table (ui/src/messages.ts): plain words per error code, Retry only where
// trying again can pass, one unit system, no compressor or library wording.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ApiProblem } from '../ui/src/problem.ts';
import { explainFailure, explainProblem } from '../ui/src/messages.ts';

const failures: [code: string, detail: string, retry: boolean, text: RegExp][] = [
  ['image.truncated', 'VipsJpeg: premature end of JPEG image', false, /^The picture is cut short/],
  ['image.decode_failed', 'vipspng: libpng read error', false, /^The picture could not be read/],
  ['image.too_many_pixels', '193656 bytes to 199229440', false, /this server’s limit/],
  ['pdf.encrypted', 'PDFium: password required', false, /password-protected/],
  ['office.zip_bomb', 'expands 4096 times', false, /unsafe size/],
  ['jobs.timeout', 'after 120 s', true, /time limit/],
  ['jobs.worker_crashed', 'exit code 134', true, /could not finish/],
  ['jobs.canceled', '', true, /^Stopped/],
  ['compress.jpg.validation.unsupported_format', 'magic bytes 25 50 44 46', false, /^This file is not a valid JPG file\.$/],
  ['some.future_code', 'sharp: Input buffer contains unsupported image format', false, /^This file could not be compressed\.$/],
];

it('a failed job: the sentence for its code, never the compressor detail, and whether Retry can help', () => {
  for (const [code, detail, retry, text] of failures) {
    const out = explainFailure({ code, detail });
    assert.match(out.text, text, code);
    if (detail) assert.ok(!out.text.includes(detail), `${code} leaks "${detail}"`);
    assert.equal(out.retry, retry, code);
  }
});

const problems: [problem: ApiProblem, retry: boolean, text: RegExp][] = [
  [new ApiProblem('request.file_too_large', 413, 'The file exceeds the 1024 MB limit.', { megabytes: 1024 }), false, /^This file is larger than this server’s limit of 1 GB\.$/],
  [new ApiProblem('request.file_too_large', 413, null, { maxFileSizeBytes: 1_148_903_751 }), false, /limit of 1\.07 GB\.$/],
  [new ApiProblem('compress.unsupported_format', 400, 'x', { supportedFormats: ['jpg', 'png'] }), false, /^This type of file is not supported\. The supported formats are listed under the drop zone\.$/],
  [new ApiProblem('compress.invalid_options', 400, 'resize.value must be ≤ 99 in percentage mode'), false, /refused\. resize\.value must be ≤ 99 in percentage mode\.$/],
  [new ApiProblem('queue.limit_exceeded', 429, 'x', {}, 3), true, /Trying again in 3 s\.$/],
  [new ApiProblem('network', 0, null), true, /could not be reached/],
  [new ApiProblem('http.502', 502, null), true, /unexpected error/],
  [new ApiProblem('api_key.invalid_or_ip_not_allowed', 401, 'x'), false, /^This key was refused/],
];

it('an API error: plain words, the unit system of the page, Retry for what can pass on retry', () => {
  for (const [p, retry, text] of problems) {
    const out = explainProblem(p);
    assert.match(out.text, text, p.code);
    assert.equal(out.retry, retry, p.code);
    assert.doesNotMatch(out.text, /\bMB\b.*\bGB\b|\(\w+\.\w+\)|plan/, p.code);
  }
});
