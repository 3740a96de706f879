/** A path or name as it can be pasted into a shell: as is when plain, else double-quoted. */
export const shellWord = (word: string): string => (/^[\w./~@:=+-]+$/.test(word) ? word : JSON.stringify(word));
