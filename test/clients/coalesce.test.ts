// The dashboard's re-reads (src/dashboard/coalesce.ts): a change that lands while a read is in
// flight must get a read that starts after it, not the in-flight one.

import { expect, it } from "vitest";
import { coalesced } from "../../src/dashboard/coalesce.js";

/** A run per call that we finish by hand, recording when each started and for which key. */
function harness() {
  const started: { key: string; finish: () => void; fail: (e: Error) => void }[] = [];
  const refetch = coalesced(
    (key: string) =>
      new Promise<void>((resolve, reject) => {
        started.push({ key, finish: resolve, fail: reject });
      }),
  );
  const tick = () => new Promise((r) => setTimeout(r, 0));
  return { started, refetch, tick };
}

it("a call during a read gets a second read that starts after the first ends; calls meanwhile share it", async () => {
  const { started, refetch, tick } = harness();
  const first = refetch("ws-1");
  expect(started).toHaveLength(1);
  const second = refetch("ws-1");
  const third = refetch("ws-1");
  expect(second).toBe(third);
  expect(second).not.toBe(first);
  await tick();
  expect(started).toHaveLength(1); // not before the first has ended

  started[0]!.finish();
  await first;
  await tick();
  expect(started).toHaveLength(2);
  let secondDone = false;
  void second.then(() => (secondDone = true));
  await tick();
  expect(secondDone).toBe(false);
  started[1]!.finish();
  await second;
  expect(started).toHaveLength(2);
});

it("with nothing in flight a call starts at once; keys never wait for each other; a failed read still lets the next one run", async () => {
  const { started, refetch, tick } = harness();
  const failing = refetch("a").catch((error: Error) => error.message);
  void refetch("b");
  expect(started.map((s) => s.key)).toEqual(["a", "b"]);

  const queued = refetch("a");
  const failed = started[0]!;
  failed.fail(new Error("network"));
  await tick();
  expect(started.map((s) => s.key)).toEqual(["a", "b", "a"]);
  expect(await failing).toBe("network");
  started[2]!.finish();
  await expect(queued).resolves.toBeUndefined();

  started[1]!.finish();
  await tick();
  void refetch("b");
  expect(started.map((s) => s.key)).toEqual(["a", "b", "a", "b"]);
});
