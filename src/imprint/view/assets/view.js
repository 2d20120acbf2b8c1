// imprint view: sorting, filtering, comparing two runs, and each run's searchable text table.
// Plain JavaScript, shipped in the package: nothing is fetched from the network.
"use strict";

function sortKey(cell) {
  const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  const num = Number(raw);
  return raw !== "" && !Number.isNaN(num) ? num : raw.toLowerCase();
}

function compareKeys(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

// a click on a heading sorts the table's rows by that column (again: the other direction)
function makeSortable(table) {
  table.querySelectorAll("thead th").forEach((th, col) => {
    if (th.hasAttribute("data-nosort")) return;
    th.addEventListener("click", () => {
      const down = th.getAttribute("aria-sort") === "ascending";
      table.querySelectorAll("thead th").forEach(h => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      const body = table.tBodies[0];
      const rows = [...body.rows];
      rows.sort((r, s) => compareKeys(sortKey(r.cells[col]), sortKey(s.cells[col])) * (down ? -1 : 1));
      rows.forEach(r => body.appendChild(r));
    });
  });
}

function setUpIndex() {
  const table = document.getElementById("runs");
  if (!table) return;
  const state = JSON.parse(document.getElementById("view-state").textContent);
  const filter = document.getElementById("filter");
  const kind = document.getElementById("kind-filter");
  const shown = document.getElementById("shown");
  const button = document.getElementById("compare");
  const note = document.getElementById("compare-note");
  function apply() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    let n = 0;
    for (const row of table.tBodies[0].rows) {
      const text = row.textContent.toLowerCase();
      const keep = (!kind.value || row.dataset.kind === kind.value) && words.every(w => text.includes(w));
      row.hidden = !keep;
      n += keep ? 1 : 0;
    }
    shown.textContent = `${n} of ${table.tBodies[0].rows.length} shown`;
  }
  filter.addEventListener("input", apply);
  kind.addEventListener("change", apply);
  let picked = []; // run ids in the order ticked: the first is A (thresholds are set there)
  table.addEventListener("change", event => {
    const box = event.target;
    if (!box.classList.contains("pick")) return;
    picked = picked.filter(id => id !== box.value);
    if (box.checked) picked.push(box.value);
    button.disabled = picked.length !== 2;
  });
  button.addEventListener("click", () => {
    const [a, b] = picked;
    const page = `${a}__vs__${b}.html`;
    if (!state.served && !state.built.includes(page)) {
      note.hidden = false;
      note.textContent = `This static site holds comparisons of runs on the same data only; ` +
        `serve it (imprint view) to compare these two, or run: imprint compare A B`;
      return;
    }
    window.location.href = `compare/${page}`;
  });
  makeSortable(table);
  apply();
}

const SHOWN_ROWS = 500; // rows drawn at once: a run of 10,000 texts stays quick to search

function setUpTexts() {
  const holder = document.getElementById("text-data");
  if (!holder) return;
  const data = JSON.parse(holder.textContent);
  const table = document.getElementById("texts-table");
  const search = document.getElementById("search");
  const count = document.getElementById("text-count");
  const heads = ["id", "label", "text", ...data.attacks.map(a => `${a} (rank)`)];
  const headRow = table.tHead.insertRow();
  let order = { col: -1, down: false };
  heads.forEach((name, col) => {
    const th = document.createElement("th");
    th.textContent = name;
    th.addEventListener("click", () => {
      order = { col, down: order.col === col ? !order.down : col >= 3 };
      headRow.querySelectorAll("th").forEach(h => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", order.down ? "descending" : "ascending");
      draw();
    });
    headRow.appendChild(th);
  });
  function key(row, col) {
    if (col === 0) return row[0];
    if (col === 1) return row[1];
    if (col === 2) return row[2].toLowerCase();
    const v = row[3][col - 3];
    return v === null ? -Infinity : v;
  }
  function draw() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let rows = data.rows.filter(r => {
      const text = `${r[0]} ${r[2]}`.toLowerCase();
      return words.every(w => text.includes(w));
    });
    if (order.col >= 0) {
      rows = rows.slice().sort((r, s) => compareKeys(key(r, order.col), key(s, order.col)) * (order.down ? -1 : 1));
    }
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const r of rows.slice(0, SHOWN_ROWS)) {
      const tr = body.insertRow();
      tr.className = r[1] === 1 ? "member" : "nonmember";
      const cells = [r[0], r[1] === 1 ? "member" : "non-member", r[2]];
      r[3].forEach((v, i) => cells.push(v === null ? "no score" : `${v.toFixed(4)} (${r[4][i]})`));
      cells.forEach((c, i) => {
        const td = tr.insertCell();
        td.textContent = c;
        td.className = ["id", "label", "text"][i] || "num";
      });
    }
    const more = rows.length > SHOWN_ROWS ? ` (the first ${SHOWN_ROWS} drawn; search to narrow)` : "";
    count.textContent = `${rows.length} of ${data.rows.length} texts${more}`;
  }
  search.addEventListener("input", draw);
  draw();
}

document.querySelectorAll("table.sortable").forEach(t => { if (t.id !== "runs") makeSortable(t); });
setUpIndex();
setUpTexts();
