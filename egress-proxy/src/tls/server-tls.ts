// The proxy's side of the inter-tier mTLS (DECISIONS "Faults and isolation in deployments"):
// certificate, key and client CA re-read when their files change (cert-manager renews them in
// place, so a restart is never needed), and only a client certificate that names the control
// plane's identity (EGRESS_CLIENT_IDENTITY, a DNS or URI SAN) may call, not any of the CA.

import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  experimental,
  Metadata,
  ResponderBuilder,
  type ServerCredentials,
  ServerInterceptingCall,
  type ServerInterceptor,
  ServerListenerBuilder,
  status,
} from "@grpc/grpc-js";
import type { Logger } from "pino";

export interface ServerTlsFiles {
  certPath: string;
  keyPath: string;
  clientCaPath: string;
  /** How often the files are read again; a renewed certificate is served from the next read. */
  refreshMs: number;
}

/** A SAN the client certificate must carry: `DNS:name` or `URI:uri` as OpenSSL prints them. */
export type ClientIdentity = { kind: "DNS" | "URI"; value: string };

/**
 * EGRESS_CLIENT_IDENTITY: `dns:NAME`, `uri:URI`, or a bare value (a URI when it has a scheme,
 * such as spiffe://cluster.local/ns/latch/sa/latch-control-plane; else a DNS name).
 */
export function parseClientIdentity(text: string): ClientIdentity {
  const explicit = /^(dns|uri):(.+)$/i.exec(text);
  if (explicit) return { kind: explicit[1]!.toUpperCase() as "DNS" | "URI", value: explicit[2]! };
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? { kind: "URI", value: text } : { kind: "DNS", value: text };
}

/** The SANs of a peer certificate, from Node's `subjectaltname` ("DNS:a, URI:b, ..."). */
function subjectAltNames(text: string | undefined): { kind: string; value: string }[] {
  if (!text) return [];
  return text.split(/,\s*/).map((entry) => {
    const at = entry.indexOf(":");
    return { kind: entry.slice(0, at), value: entry.slice(at + 1) };
  });
}

export function certificateNames(text: string | undefined, identity: ClientIdentity): boolean {
  return subjectAltNames(text).some(
    (san) =>
      san.kind === identity.kind &&
      (identity.kind === "DNS"
        ? san.value.toLowerCase() === identity.value.toLowerCase()
        : san.value === identity.value),
  );
}

/**
 * Server credentials over a file watcher: the files are read now (a missing or unreadable file
 * refuses the start with its variable named) and again every `refreshMs`. `loaded` settles once
 * the watcher has read them the first time: until then the server cannot complete a handshake,
 * so the proxy says it is ready only after it.
 */
export function watchedServerCredentials(files: ServerTlsFiles): {
  credentials: ServerCredentials;
  loaded: Promise<void>;
} {
  for (const [name, path] of [
    ["EGRESS_TLS_CERT", files.certPath],
    ["EGRESS_TLS_KEY", files.keyPath],
    ["EGRESS_TLS_CLIENT_CA", files.clientCaPath],
  ] as const) {
    try {
      readFileSync(path);
    } catch {
      throw new Error(`${name}: ${path} cannot be read`);
    }
  }
  try {
    new X509Certificate(readFileSync(files.certPath));
  } catch {
    throw new Error(`EGRESS_TLS_CERT: ${files.certPath} is not a PEM certificate`);
  }
  const provider = new experimental.FileWatcherCertificateProvider({
    certificateFile: files.certPath,
    privateKeyFile: files.keyPath,
    caCertificateFile: files.clientCaPath,
    refreshIntervalMs: files.refreshMs,
  });
  const loaded = Promise.all([
    new Promise<void>((resolve, reject) => {
      const listener = (update: experimental.IdentityCertificateUpdate | null) => {
        provider.removeIdentityCertificateListener(listener);
        if (update) resolve();
        else
          reject(
            new Error(
              `EGRESS_TLS_CERT, EGRESS_TLS_KEY: ${files.certPath} or ${files.keyPath} cannot be read`,
            ),
          );
      };
      provider.addIdentityCertificateListener(listener);
    }),
    new Promise<void>((resolve, reject) => {
      const listener = (update: experimental.CaCertificateUpdate | null) => {
        provider.removeCaCertificateListener(listener);
        if (update) resolve();
        else reject(new Error(`EGRESS_TLS_CLIENT_CA: ${files.clientCaPath} cannot be read`));
      };
      provider.addCaCertificateListener(listener);
    }),
  ]).then(() => undefined);
  // requireClientCertificate: a connection without a certificate of the client CA is refused.
  return {
    credentials: experimental.createCertificateProviderServerCredentials(provider, provider, true),
    loaded,
  };
}

/**
 * Refuses every call (the health service included) whose client certificate does not name the
 * control plane: a certificate of the same CA issued to anything else is not the control plane.
 */
export function clientIdentityInterceptor(identity: ClientIdentity, logger: Logger): ServerInterceptor {
  let lastWarned = 0;
  return (_method, call) => {
    const listener = new ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const peer = call.getAuthContext()?.sslPeerCertificate;
        if (peer && certificateNames(peer.subjectaltname, identity)) return next(metadata);
        // One line a minute at most: a misconfigured client retries many times a second.
        if (Date.now() - lastWarned > 60_000) {
          lastWarned = Date.now();
          logger.warn(
            {
              expected: `${identity.kind}:${identity.value}`,
              presented: peer?.subjectaltname?.slice(0, 200) ?? "",
            },
            "a client certificate that does not name the control plane was refused",
          );
        }
        const trailer = new Metadata();
        trailer.set("latch-error-code", "forbidden");
        call.sendStatus({
          code: status.PERMISSION_DENIED,
          details: "the client certificate does not name the control plane (EGRESS_CLIENT_IDENTITY)",
          metadata: trailer,
        });
      })
      .build();
    return new ServerInterceptingCall(
      call,
      new ResponderBuilder().withStart((next) => next(listener)).build(),
    );
  };
}
