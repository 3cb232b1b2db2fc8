// Progressive enhancement only: confirmation prompts, auto-refresh of live pages, the live tail.
"use strict";
document.addEventListener("submit", (ev) => {
  const f = ev.target;
  const text = f.getAttribute && f.getAttribute("data-confirm");
  if (text && !window.confirm(text)) ev.preventDefault();
});

function refreshLoop(main) {
  const every = parseInt(main.dataset.refresh, 10) * 1000;
  setInterval(async () => {
    if (document.hidden || document.activeElement && document.activeElement.form) return;
    try {
      const r = await fetch(main.dataset.src || location.href, {headers: {"X-Partial": "1"}});
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      document.querySelectorAll("[data-live]").forEach((el) => {
        const fresh = doc.getElementById(el.id);
        if (fresh) el.innerHTML = fresh.innerHTML;
      });
    } catch (e) { /* the next round retries */ }
  }, every);
}

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

function shown(v) {
  const note = v.note ? `<div class="note">${esc(v.note)}</div>` : "";
  return `<span class="kind ${esc(v.kind)}">${esc(v.kind)}</span><pre>${esc(v.text)}</pre>${note}`;
}

const MAX_ROWS = 200;
function startTail(btn) {
  const body = document.querySelector("#records tbody");
  const status = document.getElementById("tail-status");
  const src = new EventSource(btn.dataset.tail);
  let count = 0, skipped = 0;
  const say = () => { status.textContent = `live: ${count} new records` + (skipped ? ` (${skipped} more skipped: faster than a page can show)` : ""); };
  btn.textContent = "Stop live tail";
  status.textContent = "connecting…";
  src.onopen = () => { if (!count) status.textContent = "live: waiting for new records…"; };
  const stop = () => { src.close(); btn.textContent = "Live tail"; status.textContent = `stopped (${count} new records)`; btn.onclick = () => startTail(btn); };
  btn.onclick = stop;
  src.addEventListener("records", (ev) => {
    const rows = JSON.parse(ev.data);
    const empty = body.querySelector("td.empty");
    if (empty) empty.parentElement.remove();
    // one insertion per event (newest first), so the page is laid out once, not once per row
    const fresh = document.createElement("tbody");
    fresh.innerHTML = rows.reverse().map((r) => {
      const hs = r.headers.map(([k, v]) => `${esc(k)}=${esc(v)}`).join("<br>");
      return `<tr class="tailed"><td>${r.partition}</td><td>${r.offset}</td><td>${esc(r.time)}</td><td>${shown(r.key)}</td><td>${shown(r.value)}</td><td>${hs}</td></tr>`;
    }).join("");
    const frag = document.createDocumentFragment();
    frag.append(...fresh.rows);
    body.prepend(frag);
    count += rows.length;
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
    say();
  });
  src.addEventListener("skipped", (ev) => { skipped += parseInt(ev.data, 10) || 0; say(); });
  src.addEventListener("problem", (ev) => { status.textContent = ev.data; src.close(); });
}

window.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("main");
  if (main && main.dataset.refresh) refreshLoop(main);
  const t = document.getElementById("tail");
  if (t) t.onclick = () => startTail(t);
  document.querySelectorAll("[data-fill]").forEach((sel) => sel.addEventListener("change", () => {
    const u = new URL(location.href); u.searchParams.set(sel.name, sel.value); location.href = u;
  }));
});
