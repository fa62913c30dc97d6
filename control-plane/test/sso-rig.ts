// The setting of the single sign-on tests: a hosted plane whose egress proxy reaches a real OpenID
// provider (oidc-idp.ts) and a DNS-over-HTTPS origin (doh-server.ts), and an owner whose
// organisation connected the provider for one domain and proved it (its TXT record published, then
// checked through the proxy).
import type * as OTPAuth from "otpauth";
import { expect } from "vitest";
import { DOH_URL, startTestDoh, type TestDoh } from "./doh-server.ts";
import { type Browser, type HostedHarness, signUpOperator, startHosted } from "./hosted.ts";
import { IDP_ISSUER, startTestIdp, type TestIdp } from "./oidc-idp.ts";

export interface SsoRig {
  idp: TestIdp;
  doh: TestDoh;
  h: HostedHarness;
  owner: Browser;
  ownerEmail: string;
  ownerTotp: OTPAuth.TOTP;
  slug: string;
  organisationId: string;
  /** The TXT record that proves the domain, as published. */
  record: { name: string; value: string };
  close(): Promise<void>;
}

export async function startSsoRig(options: {
  baseUrl: string;
  label: string;
  domain: string;
  requireSso?: boolean;
}): Promise<SsoRig> {
  const idp = await startTestIdp({ redirectUri: `${options.baseUrl}/sso/callback` });
  const doh = await startTestDoh();
  const h = await startHosted({ connectTo: [idp.connectTo, doh.connectTo], ssoDnsUrl: DOH_URL });
  const close = async () => {
    await h.close();
    await idp.close();
    await doh.close();
  };
  const signedUp = await signUpOperator(h, { label: options.label });
  const owner = signedUp.browser;
  const me = (await owner.request("GET", "/api/auth/me")).json();
  const connected = await owner.request("PUT", "/api/orgs/sso", {
    issuer: IDP_ISSUER,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    email_domains: [options.domain],
    ...(options.requireSso ? { require_sso: true } : {}),
  });
  expect(connected.statusCode, connected.body).toBe(200);
  const { record } = connected.json().connection.domains[0];
  doh.publish(record.name, record.value);
  const proven = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
  expect(proven.statusCode, proven.body).toBe(200);
  expect(proven.json().checked).toEqual([{ domain: options.domain, verified: true }]);
  return {
    idp,
    doh,
    h,
    owner,
    ownerEmail: signedUp.email,
    ownerTotp: signedUp.totp,
    slug: me.organisation.slug,
    organisationId: me.organisation.id,
    record,
    close,
  };
}
