import { describe, expect, it } from "vitest";
import { findWidening } from "./item-widening.ts";

const item = { allowed_hosts: ["a.example", "b.example"], inject: "bearer" };

describe("findWidening", () => {
  it.each([
    ["the same item", item, undefined],
    ["a host removed (narrowing)", { ...item, allowed_hosts: ["a.example"] }, undefined],
    ["hosts reordered", { ...item, allowed_hosts: ["b.example", "a.example"] }, undefined],
    [
      "a host added",
      { ...item, allowed_hosts: ["a.example", "c.example"] },
      { addedHosts: ["c.example"], isInjectChanged: false },
    ],
    ["the inject mode changed", { ...item, inject: "query:key" }, { addedHosts: [], isInjectChanged: true }],
  ])("%s", (_label, after, expected) => {
    expect(findWidening(item, after)).toEqual(expected);
  });
});
