from meshctl.cli import main

main()
