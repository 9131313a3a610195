import { parse as parseContentDisposition } from 'content-disposition';

const MAX_NAME_LENGTH = 200;

/**
 * The name a downloaded input goes by: the Content-Disposition file name, else the last
 * segment of the URL path (after redirects, then the URL as given). The job's format is
 * `sourceFormat`, so the name is made to agree with it: its extension is replaced by (or, when
 * it has none, extended with) `.sourceFormat`. Undefined when neither source yields a usable
 * base name, e.g. `https://host/` or `https://host/dir/`.
 */
export function pickFileName(contentDisposition: string | undefined, urls: URL[], sourceFormat: string): string | undefined {
  const candidates = [fromContentDisposition(contentDisposition), ...urls.map(fromUrlPath)];
  const base = candidates.map((c) => (c === undefined ? undefined : sanitise(c))).find((c) => c);
  return base ? withFormat(base, sourceFormat.toLowerCase().replace(/^\./, '')) : undefined;
}

function fromContentDisposition(header: string | undefined): string | undefined {
  if (!header) return undefined;
  try {
    return parseContentDisposition(header).parameters.filename;
  } catch {
    return undefined;
  }
}

function fromUrlPath(url: URL): string | undefined {
  const last = url.pathname.split('/').pop();
  if (!last) return undefined;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** Keeps only a plain base name: no directories, control characters or characters file systems reject. */
function sanitise(name: string): string | undefined {
  const base = name.split(/[/\\]/).pop() ?? '';
  const clean = base
    .replace(/[\u0000-\u001f\u007f<>:"|?*]/g, '')
    .trim()
    .replace(/^\.+/, '')
    .replace(/[. ]+$/, '');
  return clean === '' ? undefined : clean;
}

function withFormat(name: string, format: string): string {
  const m = /^(.+)\.([a-z0-9]{1,5})$/i.exec(name);
  const stem = (m ? m[1]! : name).slice(0, MAX_NAME_LENGTH);
  return `${stem}.${format}`;
}
