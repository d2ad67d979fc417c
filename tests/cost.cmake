# The COST of the slowest tests: `ctest -j` starts the costliest first, so
# the long tests do not end up in the tail while the other core idles. The
# figures are seconds from a `ctest -j2` run on the 2-core VM (loaded by
# other builds; fuzz_frontend's is its 2,500-execution length). They only
# order a fresh build's first run: after it, ctest orders by the times it
# measured itself (Testing/Temporary/CTestCostData.txt). A test not
# registered in the including directory (or not at all) is passed over:
# tests/CMakeLists.txt and editors/CMakeLists.txt both include this file.
set(_gsl_test_costs
  sharding_reshard_pairs 80   fuzz_frontend 45             multihost_two_hosts 30
  golden_emit 29              bf16_train_moe_np4 28        bf16_train_moe_np2 21
  data_mnist 20               unit_jit 19                  unit_runtime 17
  bf16_train_transformer_np2 16  padding_model_parallel 16  mpi_moe_np64 15
  training_lm 15              sharding_mpi_reshard_pairs 15  bf16_train_moe_np1 14
  faults_kill_rank_mpi 12     editors_real_lexer 11        loop_equiv_mpi_sharded 11
  bf16_train_transformer_np4 10  bf16_train_transformer_mpi_np2 10  sharding_moe_layer 10
  sharding_transformer_block 9)
while(_gsl_test_costs)
  list(POP_FRONT _gsl_test_costs _name _cost)
  if(TEST ${_name})
    set_tests_properties(${_name} PROPERTIES COST ${_cost})
  endif()
endwhile()
