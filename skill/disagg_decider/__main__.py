from disagg_decider.entry import console

if __name__ == "__main__":  # a worker process imports this module as __mp_main__: no re-run
    console()
