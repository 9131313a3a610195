import { SaxesParser } from 'saxes';
import { JobError } from '../contract.ts';

/** Part names are compared case-insensitively (ECMA-376 Part 2, 9.1.1.1). */
const key = (partName: string): string => partName.toLowerCase();

export const CONTENT_TYPES_PART = '[Content_Types].xml';

/** The `[Content_Types].xml` map: defaults by extension, overrides by part name. */
export class ContentTypes {
  private readonly defaults = new Map<string, string>();
  private readonly overrides = new Map<string, string>();

  static parse(xml: string): ContentTypes {
    const types = new ContentTypes();
    parseXml(xml, CONTENT_TYPES_PART, (local, attrs) => {
      if (local === 'Default' && attrs.Extension && attrs.ContentType) types.defaults.set(attrs.Extension.toLowerCase(), attrs.ContentType);
      if (local === 'Override' && attrs.PartName && attrs.ContentType) types.overrides.set(key(decodePartName(attrs.PartName.replace(/^\//, ''))), attrs.ContentType);
    });
    return types;
  }

  /** Content type of a part named without its leading slash, or undefined. */
  of(partName: string): string | undefined {
    const override = this.overrides.get(key(partName));
    if (override) return override;
    const dot = partName.lastIndexOf('.');
    return dot > partName.lastIndexOf('/') ? this.defaults.get(partName.slice(dot + 1).toLowerCase()) : undefined;
  }
}

export interface Relationship {
  id: string;
  type: string;
  /** Resolved part name (no leading slash) for internal targets; null for external or unresolvable ones. */
  part: string | null;
}

/** The part a relationships part describes: `word/_rels/document.xml.rels` → `word/document.xml`, `_rels/.rels` → '' (the package). */
export function sourceOfRels(relsName: string): string | null {
  const m = /^(.*?)_rels\/([^/]*)\.rels$/i.exec(relsName);
  return m ? m[1] + m[2] : null;
}

export function parseRels(xml: string, relsName: string, source: string): Relationship[] {
  const out: Relationship[] = [];
  parseXml(xml, relsName, (local, attrs) => {
    if (local !== 'Relationship' || !attrs.Id || attrs.Target === undefined) return;
    const external = (attrs.TargetMode ?? '').toLowerCase() === 'external';
    out.push({ id: attrs.Id, type: attrs.Type ?? '', part: external ? null : resolveTarget(source, attrs.Target) });
  });
  return out;
}

/** Resolves a relative reference against a source part (RFC 3986 merge and dot removal), or null when it leaves the package. */
export function resolveTarget(source: string, target: string): string | null {
  const path = target.split('#')[0].split('?')[0];
  if (path === '' || /^[a-z][a-z0-9+.-]*:/i.test(path)) return null;
  const base = source.includes('/') ? source.slice(0, source.lastIndexOf('/') + 1) : '';
  const joined = path.startsWith('/') ? path.slice(1) : base + path;
  const out: string[] = [];
  for (const segment of joined.split('/')) {
    if (segment === '..') {
      if (out.length === 0) return null;
      out.pop();
    } else if (segment !== '.' && segment !== '') {
      out.push(segment);
    }
  }
  return out.length ? decodePartName(out.join('/')) : null;
}

function decodePartName(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** Parses a small package XML part (content types, relationships), reporting each element's local name and plain attributes. */
function parseXml(xml: string, partName: string, onElement: (local: string, attrs: Record<string, string>) => void): void {
  const parser = new SaxesParser();
  parser.on('opentag', (tag) => {
    const local = tag.name.slice(tag.name.indexOf(':') + 1);
    onElement(local, tag.attributes as Record<string, string>);
  });
  try {
    parser.write(xml).close();
  } catch (err) {
    throw new JobError('office.damaged', `The package part ${partName} is not well-formed XML: ${(err as Error).message}`);
  }
}
