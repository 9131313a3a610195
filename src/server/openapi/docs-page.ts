/** The page's only style and script, inline: the Content-Security-Policy allows these two by their hashes. */
export const DOCS_STYLE = `
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#1d2330}
h1{font-size:1.6rem}.op{border:1px solid #d5d9e2;border-radius:8px;margin:.8rem 0;padding:.6rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}.get{color:#1b6ac9}.post{color:#197a3e}.delete{color:#b3261e}
code{background:#f2f4f8;padding:0 .3em;border-radius:4px}ul{margin:.3rem 0}.muted{color:#5b6474}
`;
export const DOCS_SCRIPT = `
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
  const out=[];
  for(const [path,ops] of Object.entries(doc.paths)) for(const [m,op] of Object.entries(ops)){
    const at=r=>r.$ref?r.$ref.split('/').slice(1).reduce((o,k)=>o[k],doc):r;
    const rs=Object.entries(op.responses).map(([s,r])=>'<li><code>'+s+'</code> '+esc(at(r).description)+'</li>').join('');
    out.push('<section class="op"><div><span class="m '+m+'">'+m+'</span><code>'+esc(path)+'</code>'+(op.security&&!op.security.length?' <span class="muted">(no key)</span>':'')+' <span class="muted">'+esc(op.operationId)+'</span></div><p>'+esc(op.summary)+'</p><ul>'+rs+'</ul></section>');
  }
  document.getElementById('ops').innerHTML=out.join('');
});
`;
/** `/docs`: renders /openapi.json in the browser with no external assets (works air-gapped). */
export const DOCS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>compressd API</title>
<style>${DOCS_STYLE}</style></head><body><h1>compressd API</h1><p class="muted">Generated from <a href="/openapi.json">/openapi.json</a>.
Send the API key in <code>X-Service-Api-Key</code>.</p><main id="ops">Loading…</main>
<script>${DOCS_SCRIPT}</script></body></html>`;
