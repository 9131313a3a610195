import type { Api, JsonSchema } from './api.ts';
import { h, nextId } from './dom.ts';

type Values = Record<string, unknown>;

/** Wording for the options the service has today; anything else is labelled from its name. */
const LABELS: Record<string, string> = {
  resize: 'Resize',
  'resize.preset': 'Size',
  'resize.mode': 'Custom size in',
  'resize.value': 'Custom size',
  compression: 'PNG compression',
  'compression.enabled': 'Compress the image data',
  'compression.mode': 'Mode',
};
const ENUM_LABELS: Record<string, string> = {
  off: 'Off (keep the size)',
  custom: 'Custom…',
  '4k': '4K',
  '2k': '2K',
  pixels: 'Pixels (longest edge)',
  percentage: 'Percent',
  lossy: 'Lossy — smallest files',
  lossless: 'Lossless — no quality loss',
};
const UNITS: Record<string, string> = { pixels: 'px', percentage: '%' };

const humanise = (key: string) => key.replace(/[_-]+/g, ' ').replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase());
const labelOf = (path: string) => LABELS[path] ?? humanise(path.split('.').pop()!);
const enumLabel = (v: unknown) => ENUM_LABELS[String(v)] ?? humanise(String(v));
const isType = (s: JsonSchema, t: string) => (Array.isArray(s.type) ? s.type.includes(t) : s.type === t);

/** An object option whose `preset` enum has an "off" value stands for its `enabled` flag too (resize). */
const isPresetStyle = (s: JsonSchema) => !!s.properties?.preset?.enum?.includes('off') && !!s.properties?.enabled && isType(s.properties.enabled, 'boolean');
const isToggleStyle = (s: JsonSchema) => !isPresetStyle(s) && !!s.properties?.enabled && isType(s.properties.enabled, 'boolean');

function initialValue(s: JsonSchema): unknown {
  if (s.default !== undefined) return s.default;
  if (s.enum?.length) return s.enum[0];
  if (isType(s, 'boolean')) return false;
  return undefined;
}

const OPEN_STORAGE = 'compressd.optionsOpen';

/**
 * The options panel, generated from `GET /compress/schema/{format}` of the formats in the batch.
 * One value per option name is shared by every file whose schema has that option; each file is
 * then sent only the options its own schema lists.
 */
export class OptionsForm {
  private readonly schemas = new Map<string, Promise<JsonSchema>>();
  private readonly values: Record<string, Values> = {};
  private generation = 0;

  constructor(
    private readonly api: Api,
    /** The folding panel around the form: closed until opened, and kept as the person left it. */
    private readonly panel: HTMLDetailsElement,
    private readonly form: HTMLFormElement,
    private readonly fields: HTMLElement,
    private readonly title: HTMLElement,
    private readonly summary: HTMLElement,
  ) {
    form.addEventListener('submit', (e) => e.preventDefault());
    panel.open = localStorage.getItem(OPEN_STORAGE) === 'true';
    panel.addEventListener('toggle', () => localStorage.setItem(OPEN_STORAGE, String(panel.open)));
  }

  /** The format's schema; a failed fetch is forgotten so a later call tries again. */
  schemaFor(format: string): Promise<JsonSchema> {
    let p = this.schemas.get(format);
    if (!p) {
      p = this.api.schema(format);
      this.schemas.set(format, p);
      p.catch(() => this.schemas.delete(format));
    }
    return p;
  }

  /** `forNext`: no file is waiting, so the panel shows what files added or retried next will get. */
  async render(formats: string[], forNext = false): Promise<void> {
    const generation = ++this.generation;
    const settled = await Promise.allSettled(formats.map(async (f) => [f, await this.schemaFor(f)] as const));
    if (generation !== this.generation) return;
    const groups = new Map<string, { schema: JsonSchema; formats: string[] }>();
    for (const r of settled) {
      if (r.status !== 'fulfilled') continue;
      const [format, schema] = r.value;
      for (const [key, prop] of Object.entries(schema.properties ?? {})) {
        if (prop.const !== undefined) continue;
        const g = groups.get(key) ?? { schema: prop, formats: [] };
        g.formats.push(format);
        groups.set(key, g);
      }
    }
    this.fields.replaceChildren();
    this.panel.hidden = formats.length === 0;
    this.title.textContent = forNext ? 'Options for the next files' : 'Options';
    this.summary.textContent = groups.size === 0 ? '· none for these files, they are compressed automatically' : `· ${[...groups.keys()].map(labelOf).join(', ')}`;
    if (formats.length === 0) return;
    if (groups.size === 0) {
      this.fields.append(h('p', { class: 'none', text: 'These files have no options: they are compressed automatically.' }));
      return;
    }
    for (const [key, { schema, formats: fs }] of groups) this.fields.append(this.option(key, schema, fs));
  }

  /** The options for one file: only what its schema lists, constants included, inactive fields left out. */
  optionsFor(schema: JsonSchema): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, prop] of Object.entries(schema.properties ?? {})) {
      if (prop.const !== undefined) {
        out[key] = prop.const;
        continue;
      }
      const v = this.valuesOf(key, prop);
      if (!prop.properties) {
        if (v.value !== undefined) out[key] = v.value;
        continue;
      }
      const obj: Values = {};
      for (const sub of Object.keys(prop.properties)) {
        if (this.isActive(prop, v, sub) && v[sub] !== undefined && v[sub] !== '') obj[sub] = v[sub];
      }
      out[key] = obj;
    }
    return out;
  }

  /** Shows the browser's message on the first invalid field; false when something is invalid. */
  check(): boolean {
    if (this.panel.hidden || this.form.checkValidity()) return true;
    this.panel.open = true;
    return this.form.reportValidity();
  }

  private valuesOf(key: string, prop: JsonSchema): Values {
    let v = this.values[key];
    if (!v) {
      v = {};
      if (prop.properties) for (const [sub, s] of Object.entries(prop.properties)) v[sub] = initialValue(s);
      else v.value = initialValue(prop);
      this.values[key] = v;
    }
    return v;
  }

  private isActive(prop: JsonSchema, v: Values, sub: string): boolean {
    if (isPresetStyle(prop)) return sub === 'preset' || sub === 'enabled' || v.preset === 'custom';
    if (isToggleStyle(prop)) return sub === 'enabled' || v.enabled === true;
    return true;
  }

  private option(key: string, prop: JsonSchema, formats: string[]): HTMLElement {
    const v = this.valuesOf(key, prop);
    const applies = h('span', { class: 'applies', text: ` · ${formats.map((f) => f.toUpperCase()).join(', ')}` });
    if (!prop.properties) {
      const box = h('div', { class: 'field', 'data-option': key });
      this.control(box, key, prop, v, 'value', () => undefined);
      box.append(applies);
      return box;
    }
    const fieldset = h('fieldset', { 'data-option': key }, h('legend', {}, labelOf(key), applies));
    if (prop.description) fieldset.append(h('p', { class: 'hint', text: prop.description }));
    const rows = new Map<string, HTMLElement>();
    const refresh = () => {
      for (const [sub, row] of rows) {
        const active = this.isActive(prop, v, sub);
        // Preset-style options hide what does not apply; toggles only disable it, so the choice stays visible.
        row.hidden = isPresetStyle(prop) && !active;
        for (const input of row.querySelectorAll<HTMLInputElement | HTMLSelectElement>('input, select')) {
          input.disabled = !active;
          if (input instanceof HTMLInputElement && input.type === 'number') this.applyBounds(input, prop, v, sub, active);
        }
        const unit = row.querySelector('.unit');
        if (unit) unit.textContent = UNITS[String(v.mode)] ?? '';
      }
    };
    // A preset choice leads; the fields it unlocks follow it.
    const subs = Object.entries(prop.properties).sort(([a], [b]) => Number(isPresetStyle(prop) && b === 'preset') - Number(isPresetStyle(prop) && a === 'preset'));
    for (const [sub, s] of subs) {
      if (sub === 'enabled' && isPresetStyle(prop)) continue;
      const row = h('div', { class: 'field' });
      this.control(row, `${key}.${sub}`, s, v, sub, () => {
        if (sub === 'preset' && isPresetStyle(prop)) v.enabled = v.preset !== 'off';
        refresh();
      });
      rows.set(sub, row);
      fieldset.append(row);
    }
    refresh();
    return fieldset;
  }

  /** Bounds from the schema, narrowed by `allOf` if/then rules whose condition holds now (percent ≤ 99). */
  private applyBounds(input: HTMLInputElement, prop: JsonSchema, v: Values, sub: string, active: boolean): void {
    const base = prop.properties![sub];
    let min = base.minimum;
    let max = base.maximum;
    for (const rule of prop.allOf ?? []) {
      const conds = Object.entries(rule.if?.properties ?? {}).filter(([k]) => k !== sub);
      const holds = conds.length > 0 && conds.every(([k, c]) => c.const === undefined || v[k] === c.const);
      const then = rule.then?.properties?.[sub];
      if (holds && then) {
        min = then.minimum ?? min;
        max = then.maximum ?? max;
      }
    }
    if (min !== undefined) input.min = String(min);
    else input.removeAttribute('min');
    if (max !== undefined) input.max = String(max);
    else input.removeAttribute('max');
    input.required = active;
  }

  private control(row: HTMLElement, path: string, s: JsonSchema, v: Values, sub: string, changed: () => void): void {
    const id = nextId('opt');
    const label = labelOf(path);
    if (s.enum && s.enum.length <= 3 && s.enum.length > 1) {
      const group = h('fieldset', { class: 'radios' }, h('legend', { class: 'visually-hidden', text: label }));
      row.append(h('span', { class: 'label', 'aria-hidden': 'true', text: label }), group);
      for (const option of s.enum) {
        const input = h('input', { type: 'radio', name: id, value: String(option), checked: v[sub] === option });
        input.addEventListener('change', () => {
          if (input.checked) v[sub] = option;
          changed();
        });
        group.append(h('label', {}, input, enumLabel(option)));
      }
      return;
    }
    if (s.enum) {
      const select = h('select', { id });
      for (const option of s.enum) select.append(h('option', { value: String(option), selected: v[sub] === option, text: enumLabel(option) }));
      select.addEventListener('change', () => {
        v[sub] = s.enum!.find((o) => String(o) === select.value);
        changed();
      });
      row.append(h('label', { for: id, text: label }), select);
      return;
    }
    if (isType(s, 'boolean')) {
      const input = h('input', { type: 'checkbox', id, checked: v[sub] === true });
      input.addEventListener('change', () => {
        v[sub] = input.checked;
        changed();
      });
      row.append(h('label', { class: 'check', for: id }, input, label));
      return;
    }
    if (isType(s, 'integer') || isType(s, 'number')) {
      const input = h('input', { type: 'number', id, inputmode: 'numeric', step: isType(s, 'integer') ? 1 : 'any', value: v[sub] === undefined || v[sub] === null ? undefined : String(v[sub]) });
      input.addEventListener('input', () => {
        v[sub] = input.value === '' || !input.validity.valid ? undefined : Number(input.value);
        changed();
      });
      row.append(h('label', { for: id, text: label }), input, h('span', { class: 'unit' }));
      return;
    }
    const input = h('input', { type: 'text', id, value: typeof v[sub] === 'string' ? (v[sub] as string) : undefined });
    input.addEventListener('input', () => {
      v[sub] = input.value;
      changed();
    });
    row.append(h('label', { for: id, text: label }), input);
  }
}
