/**
 * npm run release:schema — the release step for the API (after `npm version <x.y.z> --no-git-tag-version`).
 *
 * For the version package.json now holds, and today's date (UTC):
 *   1. refuses unless that version is newer than the released one, schema.graphql is the
 *      schema the server prints, and CHANGELOG.md names every breaking change (the check
 *      test/api-changes.test.ts runs);
 *   2. turns `## [Unreleased]` into `## [x.y.z] - YYYY-MM-DD` under a fresh, empty Unreleased;
 *   3. copies schema.graphql to api/released/schema.graphql, the baseline the next changes are
 *      compared with.
 * Commit the three files together.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { printedSchema } from "../src/graphql/schema/index.js";
import { checkChangelog, compareVersions, explain, readReleased, releaseChangelog, releasedHeader } from "./api-changes.js";

const file = (name: string) => new URL(`../${name}`, import.meta.url);
const read = (name: string) => readFileSync(file(name), "utf8");

const { version } = JSON.parse(read("package.json")) as { version: string };
const released = readReleased(read("api/released/schema.graphql"));
const current = read("schema.graphql");
const changelog = read("CHANGELOG.md");
const date = new Date().toISOString().slice(0, 10);

const refuse = (why: string) => {
  console.error(why);
  process.exit(1);
};
if (!/^\d+\.\d+\.\d+$/.test(version) || compareVersions(version, released.version) <= 0) {
  refuse(`package.json's version ${version} is not newer than the released ${released.version}: run \`npm version <x.y.z> --no-git-tag-version\` first.`);
}
if (printedSchema() !== current) refuse("schema.graphql is not what the server prints: run `npm run schema:print` first.");
const problems = explain(checkChangelog(released.sdl, current, changelog), released.version);
if (problems.length) refuse(problems.join("\n"));

writeFileSync(file("CHANGELOG.md"), releaseChangelog(changelog, version, date));
writeFileSync(file("api/released/schema.graphql"), releasedHeader(version, date) + current);
console.log(`released the API as ${version} (${date}): CHANGELOG.md and api/released/schema.graphql; commit them with package.json`);
