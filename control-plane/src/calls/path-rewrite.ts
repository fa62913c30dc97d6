// Spec 4.2 rule 3: the music provider renamed playlist content from /tracks to /items. Calls on the
// old path are sent to the new one (the validated path is what the operator approved; the rewrite
// only follows the provider's rename), and a DELETE body's `tracks` key becomes `items`.

const MUSIC_API_HOST = "api.spotify.com";
const REWRITTEN_METHODS = new Set(["GET", "POST", "PUT", "DELETE"]);
/** Exactly /v1/playlists/{id}/tracks, optionally with a query; /tracks/... and other paths stay. */
const PLAYLIST_TRACKS = /^(\/v1\/playlists\/[^/?#]+)\/tracks(\?.*)?$/;

export interface PathRewrite {
  path: string;
  body: unknown;
  rewritten?: { from: string; to: string };
}

/** The path and body to send for a validated request; unchanged unless rule 3 applies. */
export function rewritePlaylistPath(host: string, method: string, path: string, body: unknown): PathRewrite {
  const match = host === MUSIC_API_HOST && REWRITTEN_METHODS.has(method) ? PLAYLIST_TRACKS.exec(path) : null;
  if (!match) return { path, body };
  const to = `${match[1]}/items${match[2] ?? ""}`;
  let sent = body;
  if (
    method === "DELETE" &&
    typeof body === "object" &&
    body !== null &&
    !Array.isArray(body) &&
    Object.hasOwn(body, "tracks") &&
    !Object.hasOwn(body, "items")
  ) {
    const { tracks, ...rest } = body as Record<string, unknown>;
    sent = { ...rest, items: tracks };
  }
  return { path: to, body: sent, rewritten: { from: path, to } };
}

/** next.for_model naming the change (spec 4.2 rule 3). */
export function describeRewrite(rewritten: { from: string; to: string }): string {
  return `The provider renamed playlist tracks to items: this call was sent to ${rewritten.to} instead of ${rewritten.from}. Use the /items path from now on.`;
}
