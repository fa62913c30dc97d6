import { describe, expect, it } from "vitest";
import { readAwsSigningScope } from "./aws-host.ts";

describe("readAwsSigningScope", () => {
  it.each([
    ["sqs.eu-west-1.amazonaws.com", "sqs", "eu-west-1"],
    ["dynamodb.us-east-2.amazonaws.com", "dynamodb", "us-east-2"],
    ["s3.eu-west-1.amazonaws.com", "s3", "eu-west-1"],
    ["photos.s3.us-west-2.amazonaws.com", "s3", "us-west-2"],
    ["my.dotted.bucket.s3.ap-southeast-2.amazonaws.com", "s3", "ap-southeast-2"],
    ["photos.s3.amazonaws.com", "s3", "us-east-1"],
    ["s3.dualstack.eu-central-1.amazonaws.com", "s3", "eu-central-1"],
    ["abc123defg.execute-api.eu-west-3.amazonaws.com", "execute-api", "eu-west-3"],
    ["iam.amazonaws.com", "iam", "us-east-1"],
    ["sts.amazonaws.com", "sts", "us-east-1"],
    ["sqs-fips.us-gov-west-1.amazonaws.com", "sqs", "us-gov-west-1"],
    ["email.eu-west-1.amazonaws.com", "ses", "eu-west-1"],
    ["photos.s3-accelerate.amazonaws.com", "s3", "us-east-1"],
  ])("reads %s as %s in %s", (host, service, region) => {
    expect(readAwsSigningScope(host)).toEqual({ service, region });
  });

  it.each([
    "example.com",
    "amazonaws.com",
    ".amazonaws.com",
    "sqs..amazonaws.com",
    "sqs.eu-west-1.amazonaws.com.cn",
    "amazonaws.com.evil.example",
    "evilamazonaws.com",
    "-bad.eu-west-1.amazonaws.com",
    "eu-west-1.amazonaws.com",
  ])("refuses %s", (host) => {
    expect(readAwsSigningScope(host)).toBeUndefined();
  });
});
