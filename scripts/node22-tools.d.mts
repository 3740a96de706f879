export declare const TOOLS_DIR: string;
export declare const NODE22: string;
export declare function ensureNode22Tools(label: string): string;
