// Where a `sigv4` item signs for: the AWS region and service read from the API host
// (DECISIONS "Providers": region and service from the host, global services in us-east-1).
// Both tiers use it: the control plane refuses to store a sigv4 item for a host it cannot read,
// and the proxy reads the same host again when it signs.

export interface AwsSigningScope {
  /** The signing name, e.g. `s3`, `sqs`, `execute-api`. */
  service: string;
  /** e.g. `eu-west-1`; `us-east-1` for a global endpoint such as `iam.amazonaws.com`. */
  region: string;
}

const AWS_SUFFIX = ".amazonaws.com";
/** Commercial, GovCloud and ISO partitions: `eu-west-1`, `us-gov-west-1`, `us-isob-east-1`. */
const REGION = /^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$/;
/** An endpoint prefix as AWS spells them: lowercase letters, digits, dashes. */
const SERVICE = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
/** Global endpoints (no region label) sign in us-east-1, the partition's home region. */
const GLOBAL_REGION = "us-east-1";
/**
 * Endpoint prefixes whose signing name differs. Kept short on purpose: a service missing here
 * fails with AWS's own SignatureDoesNotMatch, never by sending the key anywhere else.
 */
const SIGNING_NAMES: ReadonlyMap<string, string> = new Map([
  ["email", "ses"],
  ["s3-accelerate", "s3"],
]);

/**
 * Reads `<service>.<region>.amazonaws.com`, `<bucket>.s3.<region>.amazonaws.com`,
 * `<service>.amazonaws.com` (global, us-east-1), and the `dualstack` / `-fips` variants.
 * Returns undefined for any other host (including `amazonaws.com.cn`, not signed here).
 *
 * @example readAwsSigningScope("sqs.eu-west-1.amazonaws.com") // { service: "sqs", region: "eu-west-1" }
 * @example readAwsSigningScope("photos.s3.us-west-2.amazonaws.com") // { service: "s3", region: "us-west-2" }
 * @example readAwsSigningScope("iam.amazonaws.com") // { service: "iam", region: "us-east-1" }
 */
export function readAwsSigningScope(host: string): AwsSigningScope | undefined {
  if (!host.endsWith(AWS_SUFFIX)) return undefined;
  const labels = host.slice(0, -AWS_SUFFIX.length).split(".");
  if (labels.some((label) => label.length === 0)) return undefined;
  let region = GLOBAL_REGION;
  const last = labels.at(-1) ?? "";
  if (REGION.test(last)) {
    region = last;
    labels.pop();
  }
  if (labels.at(-1) === "dualstack") labels.pop();
  // The endpoint prefix is the label left of the region; a virtual-hosted S3 bucket (which may
  // itself hold dots) or an API Gateway id sits further left and is not read.
  const prefix = labels.at(-1);
  if (prefix === undefined || !SERVICE.test(prefix)) return undefined;
  const endpoint = prefix.endsWith("-fips") ? prefix.slice(0, -"-fips".length) : prefix;
  return { service: SIGNING_NAMES.get(endpoint) ?? endpoint, region };
}
