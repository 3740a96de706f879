import { Chalk } from "chalk"; console.log(typeof new Chalk({level:0}).red);
