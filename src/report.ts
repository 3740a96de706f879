/**
 * How core code tells the user something without printing: the command passes a Reporter that
 * writes to stderr (progress, warnings), so stdout stays data only.
 */
export type Reporter = {
  info(message: string): void;
  warn(message: string): void;
};

export const silentReporter: Reporter = { info() {}, warn() {} };
