// Every icon and social image of the public site (spec 4.3 "Health and discovery"), rendered from
// the one mark in control-plane/site-src/mark.svg with resvg (a Rust SVG renderer with prebuilt
// binaries and no install script). No text is drawn, so no system font can change a byte: the
// same mark gives the same files on any machine. `npm run assets` writes them to public/site/,
// where they are committed and served; site-assets.test.ts renders them again and compares.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Resvg } from "@resvg/resvg-js";

/** control-plane/site-src/mark.svg: the one source. */
export const MARK_PATH = fileURLToPath(new URL("../../site-src/mark.svg", import.meta.url));

/** The mark's colours, and the dark background of the social cards and the on-dark variant. */
const ACCENT = "#0b57d0";
const DARK = "#15181c";
const LIGHT = "#e8eaed";

/** The mark's inner drawing (without its <svg> element), to place it inside larger pictures. */
function innerOf(mark: string): string {
  const start = mark.indexOf(">", mark.indexOf("<svg")) + 1;
  return mark.slice(start, mark.lastIndexOf("</svg>")).trim();
}

/** The mark redrawn for a dark page: its two colours swapped (a light tile, an accent lock). */
function onDark(mark: string): string {
  return mark.replace(/#0b57d0|#ffffff/g, (colour) => (colour === "#ffffff" ? ACCENT : LIGHT));
}

/** A social card: the mark centred on a dark field with a band in the accent colour. */
function card(mark: string, width: number, height: number): string {
  const size = Math.round(height * 0.5);
  const x = (width - size) / 2;
  const y = (height - size) / 2 - height * 0.04;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect width="${width}" height="${height}" fill="${DARK}"/>`,
    `<rect y="${height - 24}" width="${width}" height="24" fill="${ACCENT}"/>`,
    `<g transform="translate(${x} ${y}) scale(${size / 64})">${innerOf(mark)}</g>`,
    "</svg>",
  ].join("");
}

function png(svg: string, width: number): Buffer {
  return new Resvg(svg, { fitTo: { mode: "width", value: width }, font: { loadSystemFonts: false } })
    .render()
    .asPng();
}

/**
 * An ICO file holding PNG images (allowed since Windows Vista, read by every browser): a 6-byte
 * header, one 16-byte entry per image, then the images.
 */
export function icoOf(images: ReadonlyArray<{ size: number; png: Buffer }>): Buffer {
  const header = Buffer.alloc(6 + 16 * images.length);
  header.writeUInt16LE(0, 0);
  header.writeUInt16LE(1, 2); // 1: icon
  header.writeUInt16LE(images.length, 4);
  let offset = header.length;
  images.forEach((image, index) => {
    const entry = 6 + 16 * index;
    header.writeUInt8(image.size >= 256 ? 0 : image.size, entry); // 0 means 256
    header.writeUInt8(image.size >= 256 ? 0 : image.size, entry + 1);
    header.writeUInt16LE(1, entry + 4); // colour planes
    header.writeUInt16LE(32, entry + 6); // bits per pixel
    header.writeUInt32LE(image.png.length, entry + 8);
    header.writeUInt32LE(offset, entry + 12);
    offset += image.png.length;
  });
  return Buffer.concat([header, ...images.map((image) => image.png)]);
}

/**
 * The web app manifest: the name, the colours and the two Android icons. Installed (a phone's home
 * screen), it opens the console, whose push worker then notifies the operator of new requests.
 */
function manifest(): string {
  const icons = [192, 512].map((size) => ({
    src: `/android-chrome-${size}x${size}.png`,
    sizes: `${size}x${size}`,
    type: "image/png",
  }));
  const body = {
    name: "Latch",
    short_name: "Latch",
    start_url: "/console",
    scope: "/",
    display: "standalone",
    icons,
    theme_color: ACCENT,
    background_color: DARK,
  };
  return `${JSON.stringify(body, null, 2)}\n`;
}

/** Every file of public/site/ by name, rendered from `mark` (the text of mark.svg). */
export function renderSiteAssets(mark: string = readFileSync(MARK_PATH, "utf8")): Map<string, Buffer> {
  const square = (size: number) => png(mark, size);
  return new Map<string, Buffer>([
    ["favicon.svg", Buffer.from(mark)],
    ["mark.svg", Buffer.from(mark)],
    ["mark-on-dark.svg", Buffer.from(onDark(mark))],
    ["favicon.ico", icoOf([16, 32, 48].map((size) => ({ size, png: square(size) })))],
    ["apple-touch-icon.png", square(180)],
    ["logo.png", square(512)],
    ["android-chrome-192x192.png", square(192)],
    ["android-chrome-512x512.png", square(512)],
    ["og.png", png(card(mark, 1200, 630), 1200)],
    ["og-square.png", png(card(mark, 1200, 1200), 1200)],
    ["site.webmanifest", Buffer.from(manifest())],
  ]);
}
