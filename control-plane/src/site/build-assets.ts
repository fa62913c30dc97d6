// npm run assets: renders every icon and social image from site-src/mark.svg into public/site/.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PUBLIC_ROOT } from "../pages/page-files.ts";
import { renderSiteAssets } from "./site-assets.ts";

const folder = join(PUBLIC_ROOT, "site");
mkdirSync(folder, { recursive: true });
for (const [name, bytes] of renderSiteAssets()) {
  writeFileSync(join(folder, name), bytes);
  console.log(`${name}: ${bytes.length} bytes`);
}
