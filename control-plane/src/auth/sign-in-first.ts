// A page an operator opens from elsewhere (an approval link, the OAuth consent and device pages)
// sends a browser that is not signed in to the sign-in step it still needs, naming itself in
// `return_to`. The pages' script (common.js RETURN_PATH) keeps only paths of this site it knows
// and goes back there once sign-in is done.
import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * Redirects to the first step the session lacks: /sign-in without one, else the authenticator
 * step (/verify-totp, or /enroll-totp when none is enrolled). `back` is a path of this site.
 */
export async function signInFirst(
  request: FastifyRequest,
  reply: FastifyReply,
  back: string,
): Promise<FastifyReply> {
  const session = request.operatorSession;
  let to = "/sign-in";
  if (session) {
    const isEnrolled = request.principal.kind === "operator" && (await request.principal.hasAuthenticator());
    to = isEnrolled ? "/verify-totp" : "/enroll-totp";
  }
  return reply.redirect(`${to}?return_to=${encodeURIComponent(back)}`, 302);
}
