export declare function toolsDir(name: string): string;
export declare function ensureTools(name: string, label: string): string;
