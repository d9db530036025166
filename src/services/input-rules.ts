import { z } from "zod";

/**
 * Length and emptiness rules for text inputs, in one place (docs/input.md). Which characters
 * a string may carry is decided earlier, once, for every argument (src/domain/text.ts, enforced
 * by src/graphql/plugins/storable-text.ts); these are the rules of meaning the services apply
 * through their zod schemas (parseInput).
 *
 * - Display names (members, tokens, identity sources, policies, keys, connections, outputs):
 *   not blank, at most NAME_MAX characters.
 * - Stack and workspace names: ResourceName in ./stacks.ts (at most 100, a pattern-safe charset).
 * - Keys (IdP group keys): not blank, at most KEY_MAX characters.
 * - Free text (descriptions, comments): at most TEXT_MAX characters.
 */
export const NAME_MAX = 200;
export const KEY_MAX = 256;
export const TEXT_MAX = 2000;

/** A human-chosen name: required, not only whitespace, at most NAME_MAX characters. */
export const DisplayName = z
  .string()
  .min(1, "A name is required.")
  .max(NAME_MAX, `A name is at most ${NAME_MAX} characters.`)
  .refine((s) => s.trim().length > 0, "A name must not be blank.");

/** A key from another system (an IdP group key): required, not blank, at most KEY_MAX characters. */
export const KeyText = (what = "A key") =>
  z
    .string()
    .min(1, `${what} is required.`)
    .max(KEY_MAX, `${what} is at most ${KEY_MAX} characters.`)
    .refine((s) => s.trim().length > 0, `${what} must not be blank.`);
