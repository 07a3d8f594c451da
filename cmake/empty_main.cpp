int main() { return 1; }  // placeholder until tools/rlx exists
