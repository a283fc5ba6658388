// static/js in wings: core/ (pure, DOM-free: the JS twins of the engine's nouns), canvas/ (drawing), ui/ (DOM widgets
// more than one page uses) and a folder per page (lanes/, live/, sweep/, compare/). core/ touches no DOM and imports
// only core/; no shared wing imports a page's folder.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";

const JS = new URL("../../../static/js/", import.meta.url);
const SHARED = ["core", "canvas", "ui"];
const PAGES = ["lanes", "live", "sweep", "compare"];

const modules = (wing) => readdirSync(new URL(`${wing}/`, JS)).filter((f) => f.endsWith(".js"));
const code = (wing, file) => readFileSync(new URL(`${wing}/${file}`, JS), "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, "");
const imports = (wing, file) => [...code(wing, file).matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["']([^"']+)["']/g)]
  .map((m) => new URL(m[1], new URL(`${wing}/${file}`, JS)).href.slice(JS.href.length).split("/")[0]);

test("every module sits in a wing: none is left at the top of static/js", () => {
  assert.deepEqual(readdirSync(JS).filter((f) => f.endsWith(".js")), []);
  for (const wing of [...SHARED, ...PAGES]) assert.ok(modules(wing).length, wing);
});

test("core/ is DOM-free and imports only core/", () => {
  const dom = /\b(document|window|navigator|location|history|localStorage|getContext|requestAnimationFrame|HTMLElement|ResizeObserver|devicePixelRatio|fetch)\b/;
  for (const file of modules("core")) {
    assert.equal(code("core", file).match(dom)?.[0], undefined, `core/${file}`);
    assert.deepEqual(imports("core", file).filter((wing) => wing !== "core"), [], `core/${file}`);
  }
});

test("no shared wing imports a page's folder", () => {
  for (const wing of SHARED) {
    for (const file of modules(wing)) {
      assert.deepEqual(imports(wing, file).filter((w) => PAGES.includes(w)), [], `${wing}/${file}`);
    }
  }
});
