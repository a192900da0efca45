from disagg_decider.entry import console

console()
